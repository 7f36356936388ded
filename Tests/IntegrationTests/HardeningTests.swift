import BridgeRuntime
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What the red team tried against stored text, the dashboard's files and the database's permissions, against
/// the real bridge (docs/security.md).
@Suite(.timeLimit(.minutes(2)))
struct HardeningTests {
    @Test func staticFilesStayInsideTheWebRootAndNULIsRefused() async throws {
        let folder = try TestFiles.makeDirectory("webroot")
        defer { try? FileManager.default.removeItem(at: folder) }
        let root = folder.appendingPathComponent("web")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try "<p>dashboard</p>".write(to: root.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        let secret = folder.appendingPathComponent("secret.html")
        try "<p>outside</p>".write(to: secret, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("leak.html"),
                                                   withDestinationURL: secret)
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("up"), withDestinationURL: folder)
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: """
            http:
              web_root: \(root.path)
            source:
              interval: 30

            """)
        let port = bridge.httpPort

        let page = try await HTTP.get(port, "/")
        #expect(page.status == 200)
        #expect(page.text == "<p>dashboard</p>")
        for path in ["/leak.html", "/up/secret.html"] {
            let reply = try await HTTP.get(port, path)
            #expect(reply.status == 404, "\(path) answered \(reply.status): \(reply.text)")
            #expect(!reply.text.contains("outside"))
        }
        let cut = try await HTTP.get(port, "/index.html%00.png")
        #expect(cut.status == 400)
        #expect(cut.text.contains("NUL"))
    }

    @Test func textWithNULIsRefusedNamingTheFieldAndNothingIsStored() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let token = try await APITests.token(port, "Cemalettin", "12345")
        let body = Data(#"{"title":"\u0000 hidden","fireDate":"2026-12-01T07:00:00Z"}"#.utf8)
        let refused = try await HTTP.send(port, "/api/v1/alarms", method: "POST", body: body, token: token)
        #expect(refused.status == 400)
        #expect(refused.text.contains(#"field \"title\" must not contain U+0000"#), "\(refused.text)")
        let list = try await HTTP.send(port, "/api/v1/alarms", method: "GET", token: token)
        #expect(list.status == 200)
        #expect(list.text == #"{"alarms":[],"next":null}"#, "\(list.text)")
        let login = try await HTTP.send(port, "/api/v1/login", method: "POST",
                                        body: Data(#"{"username":"Cemalettin\u0000x","password":"12345"}"#.utf8))
        #expect(login.status == 400)
        #expect(login.text.contains(#"field \"username\""#))
        #expect(try await HTTP.get(port, "/healthz").status == 200)
    }

    /// DNS rebinding: a page on another site whose name now resolves to the bridge still sends its own name.
    @Test func requestsForAnotherHostNameAre421() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        func answer(host: String) -> String {
            guard let fd = RawClient.connect(from: "127.0.0.1", port: bridge.httpPort) else { return "" }
            defer { close(fd) }
            RawClient.send(fd, Array("GET /rooms/1 HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8))
            return String(decoding: RawClient.readAll(fd), as: UTF8.self)
        }
        #expect(answer(host: "127.0.0.1:\(bridge.httpPort)").hasPrefix("HTTP/1.1 200"))
        #expect(answer(host: "localhost:\(bridge.httpPort)").hasPrefix("HTTP/1.1 200"))
        let rebound = answer(host: "attacker.example:\(bridge.httpPort)")
        #expect(rebound.hasPrefix("HTTP/1.1 421"), "\(rebound.prefix(80))")
        #expect(rebound.contains("http.allowed_hosts"))
        #expect(!rebound.contains("rooms"))
    }

    @Test func loggingOutEverywhereEndsEveryTokenAndStreamOfTheUser() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let phone = try await APITests.token(port, "Mehmet", "123456")
        let laptop = try await APITests.token(port, "Mehmet", "123456")
        let neighbour = try await APITests.token(port, "Cemalettin", "12345")
        let stream = try EventStreamTests.EventStreamClient(port: port, token: phone)
        #expect(stream.waitFor("retry: 3000"))

        #expect(try await HTTP.send(port, "/api/v1/logout/all", method: "POST", token: laptop).status == 204)
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: phone).status == 401)
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: laptop).status == 401)
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: neighbour).status == 200)
        #expect(await eventually(timeout: 5) { !stream.read(for: 0.2) }, "the stream stays open")
        #expect(await bridge.waitForLog("security: logout_everywhere user=2"))
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET",
                                    token: try await APITests.token(port, "Mehmet", "123456")).status == 200)
    }

    @Test func aDatabaseReadableByOthersIsWarnedAboutAtStart() async throws {
        let folder = try TestFiles.makeDirectory("storage-mode")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = folder.appendingPathComponent("bridge.sqlite").path
        #expect(FileManager.default.createFile(atPath: storage, contents: nil,
                                               attributes: [.posixPermissions: 0o644]))
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, storagePath: storage)
        #expect(await bridge.waitForLog("storage readable by other users"))
        #expect(bridge.log.contains("bridge.sqlite (0644)"))
    }
}
