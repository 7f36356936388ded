import BridgeCore
import CMicroHTTPD

/// An MHD response made once for a `SharedBody` and queued for every request answered with it, instead of
/// a response made, given its headers and destroyed per request (docs/performance.md, "Prepared responses").
///
/// `@unchecked Sendable` because `OpaquePointer` is not Sendable. It is safe because the response is never
/// changed after `init`, and MHD allows one response to be queued on many connections from many threads:
/// `MHD_queue_response` and MHD's own release after sending take the response's reference count under the
/// response's mutex. MHD keeps its own reference while a connection sends it, so `deinit` (when the shared
/// body goes) never frees it under a connection.
final class PreparedResponse: @unchecked Sendable {
    let response: OpaquePointer
    /// The headers it was made with: the very array, kept so that its storage stays this array's and an
    /// answer is matched by the array's identity (`sharesStorage`), not by comparing every name and value.
    private let headers: [(name: String, value: String)]

    private init?(body: [UInt8], headers: [(name: String, value: String)]) {
        guard let created = MHDConnection.response(copying: body) else { return nil }
        MHDConnection.add(headers, to: created)
        response = created
        self.headers = headers
    }

    deinit { MHD_destroy_response(response) }

    /// The prepared response for `answer`, made the first time its body is sent; nil when the answer has no
    /// shared body, or has other headers than the ones its body was first sent with.
    static func of(_ answer: HTTPResponse) -> PreparedResponse? {
        guard let shared = answer.shared, answer.stream == nil else { return nil }
        let prepared = shared.prepared.value { PreparedResponse(body: shared.bytes, headers: answer.headers) }
        guard let prepared, prepared.headers.sharesStorage(with: answer.headers) else { return nil }
        return prepared
    }
}
