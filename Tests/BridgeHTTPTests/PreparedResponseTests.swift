import BridgeCore
import BridgeHTTP
import Dispatch
import Synchronization
import Testing

/// A shared body's MHD response is made once and queued for every answer with it
/// (docs/performance.md, "Prepared responses"); what each client gets must stay exactly what its
/// route answered.
@Suite("Shared bodies are answered from one prepared response")
struct PreparedResponseTests {
    private static let document = SharedBody(Array(#"{"SensorNames":["Temperature"],"SensorValues":["21.5"]}"#.utf8))
    private static let headers: [(name: String, value: String)] = [("Content-Type", "application/json"), ("X-Kind", "shared")]

    private static func answer(_ request: HTTPRequest) -> HTTPResponse {
        switch request.path {
        case "/created":
            return HTTPResponse(status: 201, headers: headers, shared: document)
        case "/other-headers":
            // The same body with headers of its own: not the prepared response's.
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/plain"), ("X-Kind", "own")], shared: document)
        case "/changed":
            var response = HTTPResponse(status: 200, headers: headers, shared: document)
            response.body = Array("changed".utf8)
            return response
        default:
            return HTTPResponse(status: 200, headers: headers, shared: document)
        }
    }

    @Test func manyClientsAtOnceEachGetTheWholeAnswerWithItsOwnStatus() throws {
        let (server, _) = try startRecordingServer(respond: Self.answer)
        defer { server.stop() }
        let port = server.port
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for index in 0..<40 {
                let path = index % 2 == 0 ? "/room" : "/created"
                let response = exchange(port: port, "GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                let expected = path == "/room" ? 200 : 201
                guard let response, response.status == expected, response.body == Self.document.bytes,
                      response.header("X-Kind") == "shared", response.header("Content-Type") == "application/json"
                else {
                    failures.withLock { $0.append("worker \(worker) request \(index) \(path): \(String(describing: response?.status))") }
                    continue
                }
            }
        }
        #expect(failures.withLock { $0 } == [])

        // Kept alive: one connection answered from the prepared response three times in a row.
        let connection = try #require(RawHTTPConnection(port: port))
        connection.send(String(repeating: "GET /room HTTP/1.1\r\nHost: localhost\r\n\r\n", count: 2)
            + "GET /room HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        let received = String(decoding: connection.readToEnd(), as: UTF8.self)
        #expect(received.components(separatedBy: "HTTP/1.1 200 OK\r\n").count - 1 == 3)
        #expect(received.components(separatedBy: String(decoding: Self.document.bytes, as: UTF8.self)).count - 1 == 3)
    }

    @Test func otherHeadersOrAChangedBodyAreSentAsAnswered() throws {
        let (server, _) = try startRecordingServer(respond: Self.answer)
        defer { server.stop() }
        // The body's response is prepared first, with the shared headers.
        let first = try #require(exchange(port: server.port, "GET /room HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
        #expect(first.header("X-Kind") == "shared")

        let other = try #require(exchange(port: server.port,
                                          "GET /other-headers HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
        #expect(other.header("X-Kind") == "own")
        #expect(other.header("Content-Type") == "text/plain")
        #expect(other.body == Self.document.bytes)

        let changed = try #require(exchange(port: server.port,
                                            "GET /changed HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
        #expect(changed.bodyText == "changed")
        #expect(changed.header("X-Kind") == "shared")

        // HEAD: the prepared response's headers and length, no body.
        let connection = try #require(RawHTTPConnection(port: server.port))
        connection.send("HEAD /room HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        let head = String(decoding: connection.readToEnd(), as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200"))
        #expect(head.contains("X-Kind: shared"))
        #expect(head.contains("Content-Length: \(Self.document.bytes.count)"))
        #expect(head.hasSuffix("\r\n\r\n"))
    }
}
