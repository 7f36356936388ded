import BridgeCore
import BridgeHTTP
import Synchronization

/// Remembers every request the handler saw, so tests can check what arrived and that nothing did.
final class RequestRecorder: Sendable {
    private let requests = Mutex<[HTTPRequest]>([])

    var all: [HTTPRequest] { requests.withLock { $0 } }

    func record(_ request: HTTPRequest) {
        requests.withLock { $0.append(request) }
    }
}

/// Starts a server on 127.0.0.1 with an OS-chosen port that records each request and answers with `respond`.
func startRecordingServer(
    _ configuration: HTTPServerConfiguration = HTTPServerConfiguration(port: 0),
    respond: @escaping @Sendable (HTTPRequest) -> HTTPResponse = { _ in
        HTTPResponse(status: 200, headers: [(name: "Content-Type", value: "text/plain")], body: Array("ok".utf8))
    }
) throws -> (server: HTTPServer, recorder: RequestRecorder) {
    let recorder = RequestRecorder()
    let server = HTTPServer(configuration: configuration) { request in
        recorder.record(request)
        return respond(request)
    }
    try server.start()
    return (server, recorder)
}

/// Sends a complete raw request on a fresh connection and reads the response until the server closes.
func exchange(port: Int, host: String = "127.0.0.1", _ request: String) -> RawHTTPResponse? {
    guard let connection = RawHTTPConnection(host: host, port: port) else { return nil }
    connection.send(request)
    return connection.readResponse()
}

/// A plain `GET /ping` that closes the connection after the response, to prove the server still serves.
func ping(port: Int) -> RawHTTPResponse? {
    exchange(port: port, "GET /ping HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}
