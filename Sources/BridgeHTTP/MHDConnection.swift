import BridgeCore
import CMicroHTTPD
import Glibc

/// A borrowed `struct MHD_Connection *`, valid only inside the MHD callback that received it.
///
/// Deliberately not Sendable: MHD serves each connection from one thread at a time, and this view must not
/// outlive or leave that callback.
struct MHDConnection {
    let pointer: OpaquePointer

    /// Request headers in arrival order, names as sent.
    var headers: [(name: String, value: String)] { values(of: .HEADER_KIND, reserving: 16) }

    /// Query arguments in arrival order, already percent-decoded by MHD; `?flag` yields an empty value.
    var queryArguments: [(name: String, value: String)] { values(of: .GET_ARGUMENT_KIND, reserving: 0) }

    /// What the connection keeps for all its requests, made when it opened; nil only before that.
    var context: ConnectionContext? {
        CMicroHTTPD_connection_socket_context(pointer).map { Unmanaged<ConnectionContext>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The client's address as text, or an empty string when MHD cannot tell; formatted when the connection
    /// opened (`ConnectionContext`).
    var clientAddress: String {
        context?.clientAddress
            ?? CMicroHTTPD_connection_client_address(pointer).flatMap(SocketAddressText.host(of:)) ?? ""
    }

    /// Bytes of the request line plus headers, as MHD counted them while parsing.
    var requestHeaderSize: Int { CMicroHTTPD_connection_request_header_size(pointer) }

    /// The first value of a request header, matched case-insensitively by MHD.
    func header(_ name: String) -> String? {
        MHD_lookup_connection_value(pointer, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// Queues `response` on the connection; MHD copies the body, so the array may go away afterwards.
    /// A streamed response is handed its sink once queued.
    func queue(_ response: HTTPResponse, streams: StreamRegistry? = nil) -> MHD_Result {
        if let attach = response.stream, let streams {
            return queueStream(response, attach: attach, streams: streams)
        }
        if let prepared = PreparedResponse.of(response) {
            return MHD_queue_response(pointer, Self.status(response), prepared.response)
        }
        guard let created = Self.response(copying: response.body) else { return .NO }
        return queue(created, response)
    }

    /// An MHD response with its own copy of `body`, to be destroyed by the caller.
    static func response(copying body: [UInt8]) -> OpaquePointer? {
        body.withUnsafeBytes { body in
            // MUST_COPY never writes through the pointer; the mutable type is only MHD's old signature.
            MHD_create_response_from_buffer(
                body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
        }
    }

    private func queueStream(
        _ response: HTTPResponse, attach: @Sendable (any HTTPStreamSink) -> Void, streams: StreamRegistry
    ) -> MHD_Result {
        let stream = ResponseStream(connection: pointer, initial: response.body, limit: streams.bufferLimit,
                                    onFree: { streams.remove($0) })
        guard streams.add(stream) else {
            // Never attached: the route's hold on a stream place is dropped with the response.
            var busy = RequestDispatcher.error(status: 503, message: "Too many event streams; try again later")
            busy.headers.append(("Retry-After", "30"))
            return queue(busy)
        }
        let retained = Unmanaged.passRetained(stream)
        // Unknown size: MHD uses chunked encoding and asks the reader for each block.
        guard let created = MHD_create_response_from_callback(UInt64.max, 4096, mhdStreamReader, retained.toOpaque(),
                                                              mhdStreamFreed)
        else {
            retained.release()
            streams.remove(stream)
            return .NO
        }
        // A small kernel send buffer: a client that stops reading then backs up into the stream's own
        // bounded buffer within seconds, instead of into megabytes of autotuned socket memory.
        var sendBuffer: Int32 = 32 * 1024
        let socket = CMicroHTTPD_connection_socket(pointer)
        if socket >= 0 {
            setsockopt(socket, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
        }
        let queued = queue(created, response)
        if queued == .YES { attach(stream) }
        return queued
    }

    private func queue(_ created: OpaquePointer, _ response: HTTPResponse) -> MHD_Result {
        defer { MHD_destroy_response(created) }
        Self.add(response.headers, to: created)
        return MHD_queue_response(pointer, Self.status(response), created)
    }

    static func add(_ headers: [(name: String, value: String)], to response: OpaquePointer) {
        for header in headers {
            // MHD refuses headers it manages itself (Content-Length, Transfer-Encoding) and values containing
            // CR or LF; dropping those is safer than failing the whole response. `withCString` lends the
            // string's own bytes (a short one is copied to the stack); passing a String as a C pointer
            // would make a heap copy of each name and value (docs/performance.md, "The HTTP cost, profiled").
            _ = header.name.withCString { name in
                header.value.withCString { value in MHD_add_response_header(response, name, value) }
            }
        }
    }

    /// MHD rejects codes outside 100...999; a handler bug becomes a 500 rather than a dropped connection.
    private static func status(_ response: HTTPResponse) -> UInt32 {
        UInt32((100...999).contains(response.status) ? response.status : 500)
    }

    /// `reserving`: room made before collecting, so a browser's usual dozen headers take one allocation.
    private func values(of kind: MHD_ValueKind, reserving: Int) -> [(name: String, value: String)] {
        var collected: [(name: String, value: String)] = []
        collected.reserveCapacity(reserving)
        withUnsafeMutablePointer(to: &collected) { collected in
            _ = MHD_get_connection_values_n(pointer, kind, collectValue, collected)
        }
        return collected
    }
}

/// `MHD_KeyValueIteratorN` appending each pair to the array `cls` points to.
private func collectValue(
    cls: UnsafeMutableRawPointer?,
    kind: MHD_ValueKind,
    key: UnsafePointer<CChar>?,
    keySize: Int,
    value: UnsafePointer<CChar>?,
    valueSize: Int
) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let collected = cls.assumingMemoryBound(to: [(name: String, value: String)].self)
    collected.pointee.append((name: text(key, count: keySize), value: value.map { text($0, count: valueSize) } ?? ""))
    return .YES
}

/// Decodes MHD's sized strings; sizes rather than NUL termination keep values with embedded NULs whole.
private func text(_ characters: UnsafePointer<CChar>, count: Int) -> String {
    String(decoding: UnsafeRawBufferPointer(start: characters, count: count), as: UTF8.self)
}
