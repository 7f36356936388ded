import BridgeCore
import BridgeHTTP
import Glibc
import Testing

@Suite("Requests reach the handler and responses reach the client")
struct RequestDeliveryTests {
    @Test func getWithQueryAndHeadersReachesHandlerAndResponseArrives() throws {
        let (server, recorder) = try startRecordingServer { _ in
            HTTPResponse(
                status: 201,
                headers: [(name: "Content-Type", value: "text/plain"), (name: "X-Reply", value: "yes")],
                body: Array("created".utf8)
            )
        }
        defer { server.stop() }
        #expect(server.port > 0)

        let response = try #require(exchange(port: server.port, """
            GET /devices/lamp%201?room=living%20room&flag&room=kitchen HTTP/1.1\r
            Host: 127.0.0.1\r
            X-Custom-Header: Value-1\r
            X-Repeated: a\r
            X-Repeated: b\r
            Connection: close\r
            \r

            """))

        #expect(response.status == 201)
        #expect(response.header("X-Reply") == "yes")
        #expect(response.header("Content-Type") == "text/plain")
        #expect(response.bodyText == "created")

        let requests = recorder.all
        try #require(requests.count == 1)
        let request = requests[0]
        #expect(request.method == "GET")
        #expect(request.path == "/devices/lamp 1")
        #expect(request.query.map { "\($0.name)=\($0.value)" } == ["room=living room", "flag=", "room=kitchen"])
        #expect(request.queryValue("room") == "living room")
        #expect(request.headers["x-custom-header"] == "Value-1")
        #expect(request.headers["x-repeated"] == "a, b")
        #expect(request.headers["host"] == "127.0.0.1")
        #expect(request.headers["X-Custom-Header"] == nil)
        #expect(request.clientAddress == "127.0.0.1")
        #expect(request.body.isEmpty)
    }

    @Test func postBodyOfSeveralKilobytesArrivesIntact() throws {
        let body = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let (server, recorder) = try startRecordingServer { request in
            HTTPResponse(status: 200, body: request.body)
        }
        defer { server.stop() }

        let connection = try #require(RawHTTPConnection(port: server.port))
        let head = "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        connection.send(Array(head.utf8) + body)
        let response = try #require(connection.readResponse())

        #expect(response.status == 200)
        #expect(response.body == body)
        let requests = recorder.all
        try #require(requests.count == 1)
        #expect(requests[0].method == "POST")
        #expect(requests[0].path == "/echo")
        #expect(requests[0].headers["content-type"] == "application/octet-stream")
        #expect(requests[0].body == body)
    }

    @Test func bodySentInSeveralPiecesArrivesIntact() throws {
        // Larger than MHD's per-connection read buffer, and written in pauses, so the server reads it in pieces.
        let body = (0..<60_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let (server, recorder) = try startRecordingServer { request in
            HTTPResponse(status: 200, body: Array("\(request.body.count)".utf8))
        }
        defer { server.stop() }

        let connection = try #require(RawHTTPConnection(port: server.port))
        connection.send(
            "PUT /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
        for start in stride(from: 0, to: body.count, by: 15_000) {
            usleep(20_000)
            connection.send(Array(body[start..<min(start + 15_000, body.count)]))
        }
        let response = try #require(connection.readResponse())

        #expect(response.status == 200)
        #expect(response.bodyText == "60000")
        #expect(recorder.all.map(\.body) == [body])
    }

    @Test func chunkedBodyIsReassembled() throws {
        let (server, recorder) = try startRecordingServer()
        defer { server.stop() }

        let connection = try #require(RawHTTPConnection(port: server.port))
        connection.send(
            "POST /chunks HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        for chunk in ["hello ", "chunked ", "world"] {
            usleep(10_000)
            connection.send(String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n")
        }
        connection.send("0\r\n\r\n")
        let response = try #require(connection.readResponse())

        #expect(response.status == 200)
        #expect(recorder.all.map { String(decoding: $0.body, as: UTF8.self) } == ["hello chunked world"])
    }

    @Test func emptyResponseBodyAndCustomStatusArrive() throws {
        let (server, _) = try startRecordingServer { _ in
            HTTPResponse(status: 204, headers: [(name: "X-Empty", value: "1")])
        }
        defer { server.stop() }

        let response = try #require(ping(port: server.port))

        #expect(response.status == 204)
        #expect(response.header("X-Empty") == "1")
        #expect(response.body.isEmpty)
    }
}
