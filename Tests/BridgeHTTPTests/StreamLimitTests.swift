import BridgeCore
import BridgeHTTP
import Testing

@Suite("Streamed responses never take the server's last connections")
struct StreamLimitTests {
    /// With 8 connections, at most 4 streams run; the 5th is answered 503 in the server's JSON shape, and
    /// ordinary requests are still served.
    @Test func streamsBeyondHalfTheConnectionsAreAnswered503() throws {
        let (server, _) = try startRecordingServer(HTTPServerConfiguration(port: 0, maxConnections: 8)) { request in
            guard request.path == "/stream" else {
                return HTTPResponse(status: 200, headers: [("Content-Type", "text/plain")], body: Array("ok".utf8))
            }
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")],
                                body: Array(": open\n\n".utf8), stream: { _ in })
        }
        defer { server.stop() }

        var streams: [RawHTTPConnection] = []
        for index in 0..<4 {
            let connection = try #require(RawHTTPConnection(port: server.port, source: "127.0.0.\(2 + index)"))
            connection.send("GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(connection.readUntilHeadEnd(skipping: 0)?.hasPrefix("HTTP/1.1 200") == true)
            streams.append(connection)
        }
        let fifth = try #require(exchange(port: server.port,
            "GET /stream HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))

        #expect(fifth.status == 503)
        #expect(fifth.header("Content-Type") == "application/json; charset=utf-8")
        #expect(fifth.header("X-Frame-Options") == "DENY")
        #expect(fifth.header("Retry-After") == "30")
        #expect(fifth.bodyText.hasPrefix(#"{"error":{"message":"Too many event streams"#))
        #expect(ping(port: server.port)?.status == 200)
        #expect(streams.count == 4)
    }
}
