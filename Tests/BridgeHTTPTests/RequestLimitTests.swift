import BridgeCore
import BridgeHTTP
import Testing

@Suite("Oversized and malformed requests are refused without harming the server")
struct RequestLimitTests {
    private static let limits = HTTPServerConfiguration(port: 0, maxHeaderBytes: 4096, maxBodyBytes: 1024)
    private static let tooLargeJSON = #"{"error":{"message":"Request body too large"}}"#

    @Test func declaredBodyOverLimitGets413AndHandlerIsNotCalled() throws {
        let (server, recorder) = try startRecordingServer(Self.limits)
        defer { server.stop() }

        // Only the head is sent: the server must answer from Content-Length alone, without reading a body.
        let response = try #require(exchange(port: server.port,
            "POST /big HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1025\r\nConnection: close\r\n\r\n"))

        #expect(response.status == 413)
        #expect(response.header("Content-Type") == "application/json; charset=utf-8")
        #expect(response.header("X-Content-Type-Options") == "nosniff")
        #expect(response.bodyText == Self.tooLargeJSON)
        #expect(recorder.all.isEmpty)
        #expect(ping(port: server.port)?.status == 200)
    }

    @Test func chunkedBodyOverLimitGets413AndHandlerIsNotCalled() throws {
        let (server, recorder) = try startRecordingServer(Self.limits)
        defer { server.stop() }

        let chunk = String(repeating: "x", count: 600)
        let response = try #require(exchange(port: server.port,
            "POST /big HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + "258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n"))

        #expect(response.status == 413)
        #expect(response.bodyText == Self.tooLargeJSON)
        #expect(recorder.all.isEmpty)
        #expect(ping(port: server.port)?.status == 200)
    }

    @Test func bodyExactlyAtLimitIsAccepted() throws {
        let (server, recorder) = try startRecordingServer(Self.limits)
        defer { server.stop() }

        let body = String(repeating: "y", count: 1024)
        let response = try #require(exchange(port: server.port,
            "POST /fits HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1024\r\nConnection: close\r\n\r\n\(body)"))

        #expect(response.status == 200)
        #expect(recorder.all.map(\.body.count) == [1024])
    }

    /// maxHeaderBytes counts the request line and headers with their line endings, blank line included.
    @Test(arguments: [(4096, 200), (4097, 431), (20_000, 431)])
    func headersAreLimitedToMaxHeaderBytes(totalHeadBytes: Int, expectedStatus: Int) throws {
        let (server, recorder) = try startRecordingServer(Self.limits)
        defer { server.stop() }
        let prefix = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Big: "
        let suffix = "\r\n\r\n"
        let padding = String(repeating: "h", count: totalHeadBytes - prefix.utf8.count - suffix.utf8.count)

        let response = try #require(exchange(port: server.port, prefix + padding + suffix))

        #expect(response.status == expectedStatus)
        #expect(recorder.all.count == (expectedStatus == 200 ? 1 : 0))
        #expect(ping(port: server.port)?.status == 200)
    }

    /// Requests MHD must refuse by itself, before the handler could see them.
    enum RefusedRequest: String, CaseIterable, Sendable {
        case garbageRequestLine
        case hugeHeaders
        case hugeRequestLine

        var bytes: [UInt8] {
            let huge = String(repeating: "z", count: 200 * 1024)
            return switch self {
            case .garbageRequestLine: Array("GARBAGE\r\n\r\n".utf8)
            case .hugeHeaders: Array("GET / HTTP/1.1\r\nHost: localhost\r\nX-Huge: \(huge)\r\n\r\n".utf8)
            case .hugeRequestLine: Array("GET /\(huge) HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
            }
        }
    }

    @Test(arguments: RefusedRequest.allCases)
    func refusedRequestLeavesServerServing(_ refused: RefusedRequest) throws {
        let (server, recorder) = try startRecordingServer(Self.limits)
        defer { server.stop() }

        let connection = try #require(RawHTTPConnection(port: server.port))
        // The server may close before everything is written; a failed send is part of being refused.
        connection.send(refused.bytes)
        let response = connection.readResponse()

        // Refused means an error status or a connection closed without any response.
        if let response {
            #expect((400..<500).contains(response.status), "got \(response.status)")
        }
        #expect(recorder.all.isEmpty)
        #expect(ping(port: server.port)?.status == 200)
    }
}

@Suite("Percent-decoding and %00")
struct URLUnescapingTests {
    @Test func pathAndQueryAreDecodedAndANULIsRefusedBeforeTheHandler() throws {
        let (server, recorder) = try startRecordingServer()
        defer { server.stop() }

        let decoded = try #require(exchange(port: server.port,
            "GET /caf%C3%A9/%2e%ZZ%4?x=%41%20b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
        #expect(decoded.status == 200)
        #expect(recorder.all.first?.path == "/café/.%ZZ%4")
        #expect(recorder.all.first?.queryValue("x") == "A b")

        for target in ["/index.html%00.png", "/ok?name=a%00b"] {
            let refused = try #require(exchange(port: server.port,
                "GET \(target) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
            #expect(refused.status == 400, "\(target)")
            #expect(refused.bodyText.contains("must not contain %00"))
            #expect(refused.header("X-Content-Type-Options") == "nosniff")
        }
        #expect(recorder.all.count == 1)
        #expect(ping(port: server.port)?.status == 200)
    }
}
