import BridgeCrypto
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Guests (README, "Guests") against the real bridge over HTTP, with guests in a real SQLite file.
@Suite(.timeLimit(.minutes(3)))
struct GuestTests {
    typealias Client = EventStreamTests.EventStreamClient

    static func expires(in seconds: Double) -> String {
        Date().addingTimeInterval(seconds).formatted(.iso8601)
    }

    static func object(_ reply: HTTP.Reply) -> [String: Any] {
        ((try? JSONSerialization.jsonObject(with: reply.body)) as? [String: Any]) ?? [:]
    }

    /// Creates a guest of the owner's and returns the answer's fields.
    static func create(_ port: Int, owner: String, rooms: [String], access: String, seconds: Double = 3600)
        async throws -> [String: Any]
    {
        let names = rooms.map { "\"\($0)\"" }.joined(separator: ",")
        let reply = try await HTTP.send(port, "/api/v1/guests", method: "POST", body: APITests.json(
            #"{"rooms":[\#(names)],"access":"\#(access)","expires":"\#(expires(in: seconds))"}"#), token: owner)
        guard reply.status == 201 else { throw TestFailure("guest not created: \(reply.status) \(reply.text)") }
        return object(reply)
    }

    static func status(_ port: Int, _ method: String, _ path: String, _ token: String, body: String? = nil)
        async throws -> Int
    {
        try await HTTP.send(port, path, method: method, body: body.map(APITests.json), token: token).status
    }

    @Test func aReadGuestSeesOnlyItsRoomsAndCannotSwitchOrManage() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let owner = try await APITests.token(port, "Cemalettin", "12345")

        let guest = try await Self.create(port, owner: owner, rooms: ["Kitchen", "bedroom"], access: "read")
        let id = try #require(guest["id"] as? String)
        let token = try #require(guest["token"] as? String)
        #expect(guest["rooms"] as? [String] == ["kitchen", "bedroom"])
        #expect(guest["access"] as? String == "read")
        #expect((guest["expires"] as? String).flatMap { try? Date($0, strategy: .iso8601) } != nil)
        #expect(!bridge.log.contains(token), "tokens are never logged")

        let list = try await HTTP.send(port, "/api/v1/guests", method: "GET", token: owner)
        let listed = try #require(Self.object(list)["guests"] as? [[String: Any]])
        #expect(listed.count == 1)
        #expect(listed.first?["id"] as? String == id)
        #expect(listed.first?["token"] as? String == token, "the list hands out the same token")

        // Its rooms, in the seed's shape, and nothing else.
        let rooms = try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: token)
        #expect(rooms.status == 200)
        #expect(try JSONDecoder().decode(roomModel.self, from: rooms.body).roomsicon.sorted() == ["bedroom", "kitchen"])
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/Kitchen", token) == 200)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/livingroom", token) == 404)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/kitchen/history?sensor=temperature", token) == 200)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/livingroom/history?sensor=temperature", token) == 404)
        #expect(try await Self.status(port, "POST", "/api/v1/rooms/livingroom/lights", token, body: #"{"state":"ON"}"#) == 404)

        // A read guest switches nothing; no guest manages anything.
        let switched = try await HTTP.send(port, "/api/v1/rooms/kitchen/lights", method: "POST",
                                           body: APITests.json(#"{"state":"ON"}"#), token: token)
        #expect(switched.status == 403)
        #expect(switched.text.contains("only read"))
        let refused: [(String, String, String?)] = [
            ("GET", "/api/v1/guests", nil),
            ("POST", "/api/v1/guests", #"{"rooms":["kitchen"],"access":"control","expires":"\#(Self.expires(in: 60))"}"#),
            ("DELETE", "/api/v1/guests/\(id)", nil),
            ("GET", "/api/v1/alarms", nil),
            ("POST", "/api/v1/alarms", #"{"title":"x","fireDate":"2030-01-01T07:00:00Z"}"#),
            ("GET", "/api/v1/watchdogs", nil),
            ("POST", "/api/v1/groups/downstairs/lights", #"{"state":"ON"}"#),
            ("POST", "/api/v1/logout/all", nil),
            ("POST", "/api/v1/rooms", #"{"name":"Den"}"#),
            ("PUT", "/api/v1/rooms/kitchen", #"{"name":"Cookery"}"#),
            ("DELETE", "/api/v1/rooms/kitchen", nil),
        ]
        for (method, path, body) in refused {
            let status = try await Self.status(port, method, path, token, body: body)
            #expect(status == 403, "\(method) \(path) answered \(status)")
        }
        // Still one guest, and the owner's token still works.
        let again = try await HTTP.send(port, "/api/v1/guests", method: "GET", token: owner)
        #expect((Self.object(again)["guests"] as? [Any])?.count == 1)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/livingroom", owner) == 200)
    }

    /// A bridge with one more user, Deniz (id 4), with these `rooms` lines, and Deniz's token.
    static func deniz(_ broker: TestBroker, rooms: String) async throws -> (BridgeProcess, String) {
        let hash = try PasswordHasher.hash(password: "deniz-pass")
        let bridge = try await BridgeProcess(broker: broker, extraUsers: """
              - id: "4"
                username: Deniz
                password_hash: "\(hash)"
                rooms:
            \(rooms)

            """)
        return (bridge, try await APITests.token(bridge.httpPort, "Deniz", "deniz-pass"))
    }

    /// A guest's room is found among the rooms it may see: where another of the user's rooms has the
    /// asked-for name as its id, the guest still reads and switches its own room, never the other.
    @Test func aGuestAskingByANameAnotherRoomHasAsItsIdGetsItsOwnRoom() async throws {
        let broker = try await TestBroker()
        let (bridge, owner) = try await Self.deniz(broker, rooms: """
                  - {id: kitchen, name: Back room, sensors: [temperature, lights]}
                  - {id: k2, name: Kitchen, sensors: [gas, lights]}
            """)
        let port = bridge.httpPort
        let guest = try #require(try await Self.create(port, owner: owner, rooms: ["k2"], access: "control")["token"] as? String)
        func sensorNames(_ path: String, _ token: String) async throws -> [String] {
            let reply = try await HTTP.send(port, path, method: "GET", token: token)
            #expect(reply.status == 200, "\(path): \(reply.text)")
            return (Self.object(reply)["SensorNames"] as? [String]) ?? []
        }
        #expect(try await sensorNames("/api/v1/rooms/Kitchen", owner) == ["Temperature", "Lights"], "the owner's first match: the id")
        #expect(try await sensorNames("/api/v1/rooms/Kitchen", guest) == ["Gas", "Lights"], "the guest's only room")
        #expect(try await sensorNames("/api/v1/rooms/kitchen", guest) == ["Gas", "Lights"])
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/back%20room", guest) == 404)

        // Switching by the same name: the guest's room goes on, the other stays off.
        let switched = try await HTTP.send(port, "/api/v1/rooms/Kitchen/lights", method: "POST",
                                           body: APITests.json(#"{"state":"ON"}"#), token: guest)
        #expect(switched.status == 200, "\(switched.text)")
        #expect(Self.object(switched)["SensorNames"] as? [String] == ["Gas", "Lights"])
        func lights(_ path: String) async throws -> String? {
            let reply = try await HTTP.send(port, path, method: "GET", token: owner)
            let object = Self.object(reply)
            guard let names = object["SensorNames"] as? [String], let values = object["SensorValues"] as? [String],
                  let index = names.firstIndex(of: "Lights") else { return nil }
            return values[index]
        }
        #expect(try await lights("/api/v1/rooms/k2") == "On")
        #expect(try await lights("/api/v1/rooms/kitchen") == "Off", "not the room the guest was not given")
    }

    /// The answer to a switch is the switched room's, found again by its id: another room whose name is
    /// that id (and comes first) is neither answered nor switched.
    @Test func theAnswerToASwitchIsTheSwitchedRoomEvenWhenAnotherRoomIsNamedAfterItsID() async throws {
        let broker = try await TestBroker()
        let (bridge, owner) = try await Self.deniz(broker, rooms: """
                  - {id: study, name: Den, sensors: [humidity, lights]}
                  - {id: den, name: Office, sensors: [gas, lights]}
            """)
        let port = bridge.httpPort
        let guest = try #require(try await Self.create(port, owner: owner, rooms: ["den"], access: "control")["token"] as? String)
        for (token, state) in [(guest, "ON"), (owner, "OFF")] {
            let switched = try await HTTP.send(port, "/api/v1/rooms/Office/lights", method: "POST",
                                               body: APITests.json("{\"state\":\"\(state)\"}"), token: token)
            #expect(switched.status == 200, "\(switched.text)")
            let answer = Self.object(switched)
            #expect(answer["SensorNames"] as? [String] == ["Gas", "Lights"], "\(switched.text)")
            #expect((answer["SensorValues"] as? [String])?.last == (state == "ON" ? "On" : "Off"), "\(switched.text)")
        }
    }

    @Test func aControlGuestSwitchesOnlyItsRoomsAndAnotherUsersGuestIsNotMine() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let owner = try await APITests.token(port, "Cemalettin", "12345")
        let other = try await APITests.token(port, "Mehmet", "123456")
        let guest = try await Self.create(port, owner: owner, rooms: ["kitchen"], access: "control")
        let token = try #require(guest["token"] as? String)
        let id = try #require(guest["id"] as? String)

        for (state, shown) in [("ON", "On"), ("OFF", "Off")] {
            let switched = try await HTTP.send(port, "/api/v1/rooms/kitchen/lights", method: "POST",
                                               body: APITests.json(#"{"state":"\#(state)"}"#), token: token)
            #expect(switched.status == 200)
            #expect((Self.object(switched)["SensorValues"] as? [String])?[2] == shown, "\(switched.text)")
            let owners = try await HTTP.send(port, "/api/v1/rooms/kitchen", method: "GET", token: owner)
            #expect((Self.object(owners)["SensorValues"] as? [String])?[2] == shown, "the owner sees it: \(owners.text)")
        }
        #expect(try await Self.status(port, "POST", "/api/v1/rooms/bedroom/lights", token, body: #"{"state":"ON"}"#) == 404)

        // Mehmet has a kitchen too; the guest is not his, and he can't revoke it.
        let list = try await HTTP.send(port, "/api/v1/guests", method: "GET", token: other)
        #expect((Self.object(list)["guests"] as? [Any])?.count == 0)
        #expect(try await Self.status(port, "DELETE", "/api/v1/guests/\(id)", other) == 404)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/kitchen", token) == 200)
    }

    @Test func badGuestsAreRefusedNamingEveryFieldAndTheBoundsHold() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, extraUsers: APITests.thirdUser)
        let port = bridge.httpPort
        let owner = try await APITests.token(port, "Cemalettin", "12345")
        let far = Self.expires(in: 31 * 24 * 3600)
        let cases: [(String, [String])] = [
            (#"{}"#, [#"field "rooms" is required"#, #"field "access" is required"#, #"field "expires" is required"#]),
            (#"{"rooms":["kitchen","attic","kitchen",3],"access":"write","expires":"tomorrow","admin":true}"#,
             [#"field "rooms[1]": no room "attic""#, #"field "rooms[2]": "kitchen" is named twice"#,
              #"field "rooms[3]" must be a room name"#, #"field "access" must be "read" or "control""#,
              #"field "expires" must be an ISO 8601 date"#, #"field "admin" is not known"#]),
            (#"{"rooms":[],"access":"read","expires":"2020-01-01T00:00:00Z"}"#,
             [#"field "rooms" must name 1 to 16 rooms"#, #"field "expires" must be in the future"#]),
            (#"{"rooms":"kitchen","access":"read","expires":"\#(far)"}"#,
             [#"field "rooms" must be an array"#, #"field "expires" must be at most 30 days from now"#]),
            ("[1]", ["must be a JSON object"]),
        ]
        for (body, messages) in cases {
            let reply = try await HTTP.send(port, "/api/v1/guests", method: "POST", body: APITests.json(body), token: owner)
            #expect(reply.status == 400, "\(body)")
            for message in messages {
                #expect(reply.text.contains(message.replacingOccurrences(of: "\"", with: "\\\"")),
                        "\(body): \(reply.text) lacks \(message)")
            }
        }
        let seventeen = (0..<17).map { _ in "\"kitchen\"" }.joined(separator: ",")
        let tooMany = try await HTTP.send(port, "/api/v1/guests", method: "POST", body: APITests.json(
            #"{"rooms":[\#(seventeen)],"access":"read","expires":"\#(Self.expires(in: 60))"}"#), token: owner)
        #expect(tooMany.status == 400)
        #expect(try await Self.status(port, "GET", "/api/v1/guests", owner) == 200)
        #expect((Self.object(try await HTTP.send(port, "/api/v1/guests", method: "GET", token: owner))["guests"]
            as? [Any])?.count == 0, "nothing half-applied")

        // Twenty guests at once per user; the 21st is refused until one is revoked.
        var ids: [String] = []
        for _ in 0..<20 {
            ids.append(try #require(try await Self.create(port, owner: owner, rooms: ["garden"], access: "read")["id"] as? String))
        }
        let twentyFirst = try await HTTP.send(port, "/api/v1/guests", method: "POST", body: APITests.json(
            #"{"rooms":["garden"],"access":"read","expires":"\#(Self.expires(in: 60))"}"#), token: owner)
        #expect(twentyFirst.status == 409)
        #expect(twentyFirst.text.contains("At most 20 guests"))
        #expect(try await Self.status(port, "DELETE", "/api/v1/guests/\(ids[0])", owner) == 204)
        #expect(try await Self.status(port, "DELETE", "/api/v1/guests/\(ids[0])", owner) == 404)
        _ = try await Self.create(port, owner: owner, rooms: ["garden"], access: "read")
        // Another user's bound is their own.
        let ayse = try await APITests.token(port, "Ayse", "attic-pass")
        _ = try await Self.create(port, owner: ayse, rooms: ["attic"], access: "read")
    }

    @Test func revokingAGuestEndsItsTokenAndItsOpenStreamAtOnce() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let owner = try await APITests.token(port, "Cemalettin", "12345")
        let guest = try await Self.create(port, owner: owner, rooms: ["kitchen"], access: "read")
        let token = try #require(guest["token"] as? String)
        let id = try #require(guest["id"] as? String)

        let stream = try Client(port: port, token: token)
        #expect(stream.waitFor("retry: 3000"))
        // The simulation (every 0.2 s) sends readings: only the kitchen's reach the guest.
        #expect(stream.waitFor("\"room\":\"kitchen\"", seconds: 10))
        let ownerStream = try Client(port: port, token: owner)
        #expect(ownerStream.waitFor("\"room\":\"livingroom\"", seconds: 10))
        _ = stream.read(for: 1)
        let rooms = Set(stream.text.matches(of: /"room":"([a-z]+)"/).map { String($0.1) })
        #expect(rooms == ["kitchen"], "the guest's stream carried \(rooms)")

        #expect(try await Self.status(port, "DELETE", "/api/v1/guests/\(id)", owner) == 204)
        #expect(await eventually(timeout: 3) { !stream.read(for: 0.2) }, "the revoked guest's stream stays open")
        #expect(try await Self.status(port, "GET", "/api/v1/rooms", token) == 401)
        #expect(ownerStream.read(for: 0.5), "the owner's stream goes on")
        let again = try Client(port: port, token: token)
        #expect(again.waitFor("\r\n\r\n"))
        #expect(again.text.hasPrefix("HTTP/1.1 401"))
    }

    /// A user's guests together hold at most half the user's stream places (8 of 16), beside the
    /// user's own, so guests can't keep the owner from following the home.
    @Test func guestsShareHalfTheUsersStreamPlacesAndTheOwnerKeepsTheirs() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 30\n")
        let port = bridge.httpPort
        let owner = try await APITests.token(port, "Cemalettin", "12345")
        let first = try #require(try await Self.create(port, owner: owner, rooms: ["kitchen"], access: "read")["token"] as? String)
        let second = try #require(try await Self.create(port, owner: owner, rooms: ["garden"], access: "read")["token"] as? String)
        func opened(_ clients: [Client]) -> Int {
            clients.filter { _ = $0.waitFor("\r\n\r\n"); return $0.text.hasPrefix("HTTP/1.1 200") }.count
        }
        let guests = try (0..<6).map { _ in try Client(port: port, token: first) }
            + (0..<4).map { _ in try Client(port: port, token: second) }
        #expect(opened(guests) == 8)
        #expect(guests.filter { $0.text.hasPrefix("HTTP/1.1 429") }.count == 2)
        let owners = try (0..<8).map { _ in try Client(port: port, token: owner) }
        #expect(opened(owners) == 8, "the owner's places are the owner's")
    }

    @Test func aGuestEndsAtItsExpiryAndItsStreamWithIt() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let owner = try await APITests.token(port, "Cemalettin", "12345")
        let guest = try await Self.create(port, owner: owner, rooms: ["kitchen"], access: "control", seconds: 3)
        let token = try #require(guest["token"] as? String)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/kitchen", token) == 200)
        let stream = try Client(port: port, token: token)
        #expect(stream.waitFor("retry: 3000"))
        #expect(stream.waitFor("event: session_expired", seconds: 8))
        #expect(await eventually(timeout: 3) { !stream.read(for: 0.2) }, "the expired guest's stream stays open")
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/kitchen", token) == 401)
        #expect(try await Self.status(port, "POST", "/api/v1/rooms/kitchen/lights", token, body: #"{"state":"ON"}"#) == 401)
        let list = try await HTTP.send(port, "/api/v1/guests", method: "GET", token: owner)
        #expect((Self.object(list)["guests"] as? [Any])?.count == 0, "an expired guest is no longer listed")
    }

    @Test func guestsSurviveARestartAndRevocationsToo() async throws {
        let broker = try await TestBroker()
        let folder = try TestFiles.makeDirectory("guests")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = folder.appendingPathComponent("bridge.sqlite").path
        var first: BridgeProcess? = try await BridgeProcess(broker: broker, storagePath: storage)
        let owner = try await APITests.token(first!.httpPort, "Cemalettin", "12345")
        let kept = try #require(try await Self.create(first!.httpPort, owner: owner, rooms: ["garden"], access: "read")["token"] as? String)
        let revoked = try await Self.create(first!.httpPort, owner: owner, rooms: ["garden"], access: "read")
        let revokedToken = try #require(revoked["token"] as? String)
        #expect(try await Self.status(first!.httpPort, "DELETE", "/api/v1/guests/\(revoked["id"] as? String ?? "")", owner) == 204)
        first?.signal(SIGTERM)
        _ = first?.waitForExit(timeout: 10)
        first = nil

        let second = try await BridgeProcess(broker: broker, storagePath: storage)
        let port = second.httpPort
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/garden", kept) == 200)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/kitchen", kept) == 404)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms/garden", revokedToken) == 401)
        let list = try await HTTP.send(port, "/api/v1/guests", method: "GET", token: owner)
        #expect((Self.object(list)["guests"] as? [[String: Any]])?.map { $0["token"] as? String } == [kept])

        // Logging out everywhere ends the guests too; a guest logging out ends itself.
        let other = try await Self.create(port, owner: owner, rooms: ["garden"], access: "read")
        let otherToken = try #require(other["token"] as? String)
        #expect(try await Self.status(port, "POST", "/api/v1/logout", otherToken) == 204)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms", otherToken) == 401)
        #expect(try await Self.status(port, "POST", "/api/v1/logout/all", owner) == 204)
        #expect(try await Self.status(port, "GET", "/api/v1/rooms", kept) == 401)
        let fresh = try await APITests.token(port, "Cemalettin", "12345")
        let after = try await HTTP.send(port, "/api/v1/guests", method: "GET", token: fresh)
        #expect((Self.object(after)["guests"] as? [Any])?.count == 0)
    }
}
