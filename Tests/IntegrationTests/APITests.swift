import BridgeCrypto
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The authenticated API v1 over real HTTP, with sessions in a real SQLite file.
@Suite(.timeLimit(.minutes(3)))
struct APITests {
    /// A third user whose room no demo user has, so "another user's room" can be asked for.
    static let thirdUser: String = {
        let hash = (try? PasswordHasher.hash(password: "attic-pass")) ?? ""
        return """
              - id: "3"
                username: Ayse
                password_hash: "\(hash)"
                rooms: [Attic]

            """
    }()

    static func json(_ text: String) -> Data { Data(text.utf8) }

    static func login(_ port: Int, _ username: String, _ password: String) async throws -> HTTP.Reply {
        try await HTTP.send(port, "/api/v1/login", method: "POST",
                            body: json(#"{"username":"\#(username)","password":"\#(password)"}"#))
    }

    static func token(_ port: Int, _ username: String, _ password: String) async throws -> String {
        let reply = try await login(port, username, password)
        let object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
        guard reply.status == 200, let token = object?["token"] as? String else {
            throw TestFailure("login failed: \(reply.status) \(reply.text)")
        }
        return token
    }

    @Test func loginGivesATokenAndEveryRouteChecksIt() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, extraUsers: Self.thirdUser)
        let port = bridge.httpPort

        let login = try await Self.login(port, "Cemalettin", "12345")
        #expect(login.status == 200)
        let body = try JSONSerialization.jsonObject(with: login.body) as? [String: Any]
        let token = try #require(body?["token"] as? String)
        #expect(token.split(separator: ".").count == 2, "payload.MAC: \(token)")
        #expect(body?["userID"] as? String == "1")
        #expect((body?["rooms"] as? [String])?.first == "livingroom")
        #expect(!bridge.log.contains(token), "tokens are never logged")
        #expect(!bridge.log.contains("12345"), "passwords are never logged")

        let routes: [(String, String, Data?)] = [
            ("GET", "/api/v1/rooms", nil),
            ("GET", "/api/v1/rooms/kitchen", nil),
            ("POST", "/api/v1/rooms/kitchen/lights", Self.json(#"{"state":"TOGGLE"}"#)),
            ("POST", "/api/v1/logout", nil),
        ]
        for (method, path, payload) in routes {
            let missing = try await HTTP.send(port, path, method: method, body: payload)
            #expect(missing.status == 401, "\(method) \(path) without a token")
            #expect(missing.headers["www-authenticate"] == "Bearer")
            #expect(missing.text == #"{"error":{"message":"Missing, invalid or expired token"}}"#)
            let forged = try await HTTP.send(port, path, method: method, body: payload, token: "not-a-real-token")
            #expect(forged.status == 401, "\(method) \(path) with a made-up token")
        }

        let rooms = try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: token)
        #expect(rooms.status == 200)
        #expect(try JSONDecoder().decode(roomModel.self, from: rooms.body).roomsicon.count == 8)
        let kitchen = try await HTTP.send(port, "/api/v1/rooms/Kitchen", method: "GET", token: token)
        #expect(kitchen.status == 200)
        #expect(kitchen.text.hasPrefix(#"{"SensorNames":["Temperature","Humidity","Lights","Gas"]"#))
        let updated = (try JSONSerialization.jsonObject(with: kitchen.body) as? [String: Any])?["UpdatedAt"] as? String
        #expect(updated.flatMap { try? Date($0, strategy: .iso8601) } != nil, "UpdatedAt is ISO 8601: \(updated ?? "nil")")

        // Another user's room is 404, as is a room nobody has.
        let other = try await HTTP.send(port, "/api/v1/rooms/attic", method: "GET", token: token)
        #expect(other.status == 404)
        #expect(try await HTTP.send(port, "/api/v1/rooms/attic/lights", method: "POST",
                                    body: Self.json(#"{"state":"ON"}"#), token: token).status == 404)
        let ayse = try await Self.token(port, "Ayse", "attic-pass")
        #expect(try await HTTP.send(port, "/api/v1/rooms/attic", method: "GET", token: ayse).status == 200)
        #expect(try await HTTP.send(port, "/api/v1/rooms/kitchen", method: "GET", token: ayse).status == 404)

        // Wrong method, unknown route.
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "DELETE", token: token).status == 405)
        #expect(try await HTTP.send(port, "/api/v1/nothing", method: "GET", token: token).status == 404)
    }

    @Test func lightsGoThroughTheCommandPathAndBadBodiesNameTheField() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/#"])
        let token = try await Self.token(port, "Cemalettin", "12345")

        let on = try await HTTP.send(port, "/api/v1/rooms/kitchen/lights", method: "POST",
                                     body: Self.json(#"{"state":"ON"}"#), token: token)
        #expect(on.status == 200)
        #expect(try JSONDecoder().decode(sensorsModel.self, from: on.body).SensorValues[2] == "On")
        try await watcher.waitFor("smarthome/1/kitchen/lights", payload: "ON")
        #expect(try JSONDecoder().decode(sensorsModel.self, from: try await HTTP.get(port, "/rooms/1/Kitchen").body)
            .SensorValues[2] == "On")

        let cases: [(String, String)] = [
            (#"{"state":"DIM"}"#, #"field \"state\" must be ON, OFF or TOGGLE"#),
            (#"{"light":"ON"}"#, #"field \"state\" is required"#),
            (#"{"state":true}"#, #"field \"state\" must be a string"#),
            ("not json", "request body is not valid JSON"),
            ("", "request body is empty; expected a JSON object"),
        ]
        for (payload, message) in cases {
            let reply = try await HTTP.send(port, "/api/v1/rooms/kitchen/lights", method: "POST",
                                            body: Self.json(payload), token: token)
            #expect(reply.status == 400, "\(payload)")
            #expect(reply.text == #"{"error":{"message":"\#(message)"}}"#, "\(reply.text)")
        }
        #expect(try JSONDecoder().decode(sensorsModel.self, from: try await HTTP.get(port, "/rooms/1/Kitchen").body)
            .SensorValues[2] == "On", "bad bodies changed nothing")
        let badLogin = try await HTTP.send(port, "/api/v1/login", method: "POST", body: Self.json(#"{"username":"x"}"#))
        #expect(badLogin.status == 400)
        #expect(badLogin.text.contains(#"field \"password\" is required"#))
    }

    @Test func logoutRevokesExpiryEndsAndTokensOutliveARestart() async throws {
        let broker = try await TestBroker()
        let storage = try TestFiles.makeDirectory("sessions").appendingPathComponent("bridge.sqlite").path
        var bridge: BridgeProcess? = try await BridgeProcess(broker: broker, storagePath: storage)
        var port = bridge!.httpPort
        let kept = try await Self.token(port, "Cemalettin", "12345")
        let revoked = try await Self.token(port, "Mehmet", "123456")
        #expect(try await HTTP.send(port, "/api/v1/logout", method: "POST", token: revoked).status == 204)
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: revoked).status == 401)

        bridge?.signal(SIGTERM)
        #expect(bridge?.waitForExit(timeout: 10) == 0)
        bridge = nil
        bridge = try await BridgeProcess(broker: broker, storagePath: storage)
        port = bridge!.httpPort
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: kept).status == 200)
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: revoked).status == 401)
        bridge = nil

        let shortLived = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_HTTP_SESSION_TTL": "1"])
        let expiring = try await Self.token(shortLived.httpPort, "Cemalettin", "12345")
        #expect(try await HTTP.send(shortLived.httpPort, "/api/v1/rooms", method: "GET", token: expiring).status == 200)
        // Expiries are whole seconds rounded up, so a 1 s token lives 1 to 2 s.
        try await Task.sleep(for: .milliseconds(2100))
        #expect(try await HTTP.send(shortLived.httpPort, "/api/v1/rooms", method: "GET", token: expiring).status == 401)
    }

    @Test func repeatedBadLoginsAreThrottledWithoutLockingOutOthers() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        var attempts = 0
        var throttled: HTTP.Reply?
        while attempts < 20, throttled == nil {
            attempts += 1
            let reply = try await Self.login(port, "Cemalettin", "guess\(attempts)")
            if reply.status == 429 { throttled = reply } else { #expect(reply.status == 401) }
        }
        let reply = try #require(throttled, "no 429 after \(attempts) bad logins")
        #expect(Int(reply.headers["retry-after"] ?? "") ?? 0 >= 1)
        #expect(reply.text.contains("Too many failed logins"))
        // While throttled even the right password waits...
        #expect(try await Self.login(port, "Cemalettin", "12345").status == 429)
        // ...but another user from the same address logs in.
        #expect(try await Self.login(port, "Mehmet", "123456").status == 200)
        // The legacy route shares the same throttle.
        #expect(try await HTTP.get(port, "/login/Cemalettin/12345").status == 429)
        print("throttling: 429 after \(attempts) bad logins")
    }

    @Test func legacyLoginIsThrottledToo() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        var statuses: [Int] = []
        for attempt in 0..<8 {
            statuses.append(try await HTTP.get(bridge.httpPort, "/login/Mehmet/wrong\(attempt)").status)
            if statuses.last == 429 { break }
        }
        #expect(statuses.last == 429, "\(statuses)")
        #expect(statuses.dropLast().allSatisfy { $0 == 200 }, "the original answered 200 {\"userID\":\"0\"}")
    }

    @Test func everyResponseCarriesSecurityHeaders() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        for path in ["/healthz", "/rooms/1", "/nothing", "/api/v1/rooms"] {
            let reply = try await HTTP.get(bridge.httpPort, path)
            #expect(reply.headers["x-content-type-options"] == "nosniff", "\(path)")
            #expect(reply.headers["x-frame-options"] == "DENY")
            #expect(reply.headers["content-security-policy"]?.contains("default-src 'none'") == true)
            #expect(reply.headers["referrer-policy"] == "no-referrer")
        }
    }
}
