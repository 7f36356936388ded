import BridgeCore
import CMicroHTTPD
import Glibc
import Synchronization

/// What MHD's callbacks need from the server: the limits and the handler. Passed to MHD as the `cls` pointer.
final class RequestDispatcher: Sendable {
    private let handler: @Sendable (HTTPRequest) -> HTTPResponse
    private let maxHeaderBytes: Int
    let maxBodyBytes: Int
    /// Streamed responses in progress, ended before the daemon stops.
    let streams: StreamRegistry
    /// Which connections are kept: head deadline, per-address limit, reserved slots.
    let connections: ConnectionGuard
    /// Connections whose current request decoded a `%00` in its path or query (see `URLUnescaping`).
    private let withNUL = Mutex<Set<UInt>>([])
    /// How many connections `withNUL` holds, so that the usual case, none, is checked without its lock
    /// on every request. A mark is made and read on the connection's own thread (MHD serves a connection
    /// from one thread), so a count of zero read there never misses that connection's mark.
    private let marked = Atomic<Int>(0)

    init(configuration: HTTPServerConfiguration, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.handler = handler
        // Streams hold their connection for as long as they run, so they may take at most half the slots: the
        // rest stay for ordinary requests (README "Live events").
        streams = StreamRegistry(bufferLimit: configuration.maxStreamBufferBytes,
                                 capacity: max(1, configuration.maxConnections / 2))
        connections = ConnectionGuard(limits: ConnectionAdmission.Limits(
            maxConnections: max(configuration.maxConnections, 1),
            maxPerAddress: max(configuration.maxConnectionsPerAddress, 1),
            headTimeout: configuration.requestHeadTimeoutSeconds))
        self.maxHeaderBytes = configuration.maxHeaderBytes
        self.maxBodyBytes = configuration.maxBodyBytes
    }

    /// First access-handler call of a request: headers are parsed, no body has been read.
    /// Refusing here lets MHD skip the body and close the connection instead of reading it.
    func headersReceived(on connection: MHDConnection) -> MHD_Result {
        if marked.load(ordering: .acquiring) > 0, forgetNUL(UInt(bitPattern: connection.pointer)) {
            return connection.queue(Self.error(status: 400, message: "the request path or query must not contain %00 (NUL)"))
        }
        // The memory limit given to MHD leaves headroom above maxHeaderBytes (see DaemonHandle), so the exact
        // limit is enforced here.
        if connection.requestHeaderSize > maxHeaderBytes {
            return connection.queue(Self.error(status: 431, message: "Request headers too large"))
        }
        if let declared = connection.header("Content-Length").flatMap(UInt64.init), declared > UInt64(maxBodyBytes) {
            return connection.queue(Self.bodyTooLarge)
        }
        return .YES
    }

    /// MHD decoded a NUL in the path or query of the request now arriving on `connection`.
    func requestHasNUL(_ connection: UInt) {
        if withNUL.withLock({ $0.insert(connection).inserted }) { marked.add(1, ordering: .releasing) }
    }

    /// A connection closed: forget a NUL mark its last request may have left (MHD refused it before the handler).
    func connectionClosed(_ connection: UInt) {
        if marked.load(ordering: .acquiring) > 0 { _ = forgetNUL(connection) }
    }

    /// Removes the connection's NUL mark; whether it had one.
    private func forgetNUL(_ connection: UInt) -> Bool {
        guard withNUL.withLock({ $0.remove(connection) != nil }) else { return false }
        marked.subtract(1, ordering: .releasing)
        return true
    }

    /// Last access-handler call of a request: the whole body has been read.
    func requestCompleted(
        on connection: MHDConnection, method: String, path: String, pending: PendingRequest
    ) -> MHD_Result {
        // A chunked body has no declared length, so it can only be found too large while it is being read,
        // when MHD does not accept a response yet.
        if pending.isTooLarge {
            return connection.queue(Self.bodyTooLarge)
        }
        let request = HTTPRequest(
            method: method,
            path: path,
            query: connection.queryArguments,
            headers: HTTPHeaders(connection.headers),
            body: pending.body,
            clientAddress: connection.clientAddress
        )
        return connection.queue(handler(request), streams: streams)
    }

    private static let bodyTooLarge = error(status: 413, message: "Request body too large")

    /// The server's own refusals, in the shape and with the headers of every other answer (README "HTTP").
    static func error(status: Int, message: String) -> HTTPResponse {
        var response = HTTPRoutes.error(status, message)
        response.headers.append(contentsOf: HTTPRoutes.securityHeaders)
        return response
    }
}

/// The streamed responses in progress, at most `capacity`, so the server can end them before stopping.
final class StreamRegistry: Sendable {
    let bufferLimit: Int
    let capacity: Int
    private let live = Mutex<[ObjectIdentifier: ResponseStream]>([:])

    init(bufferLimit: Int, capacity: Int) {
        self.bufferLimit = bufferLimit
        self.capacity = capacity
    }

    /// Adds a stream unless `capacity` are running; checked and added under one lock.
    func add(_ stream: ResponseStream) -> Bool {
        live.withLock { live in
            guard live.count < capacity else { return false }
            live[ObjectIdentifier(stream)] = stream
            return true
        }
    }

    func remove(_ stream: ResponseStream) { live.withLock { $0[ObjectIdentifier(stream)] = nil } }

    var count: Int { live.withLock { $0.count } }

    /// Ends every stream and waits (bounded) until MHD has let go of them.
    func stopAll() {
        for stream in live.withLock({ Array($0.values) }) { stream.stopForShutdown() }
        for _ in 0..<200 where count > 0 { usleep(5_000) }
    }
}
