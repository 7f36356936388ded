import BridgeStorage
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Admins (README, "Admins and unbound devices") against the real bridge and a real mosquitto: the
/// users list, config users refused with 409 naming the file, and devices no binding claims, from
/// zigbee2mqtt-shaped messages and a real rtl_433 frame published to the broker.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct AdminTests {
    /// An admin whose rooms bind a zigbee2mqtt climate sensor, an rtl_433 sensor (id 7) and a Tasmota plug.
    static let admin = """
          - id: "3"
            username: Devon
            password_hash: "\(DeviceBindingTests.hash)"
            admin: true
            rooms:
              - name: Bedroom
                sensors:
                  - { name: Temperature, zigbee2mqtt: { device: bed_climate } }
                  - { name: Lights, tasmota: { topic: bed_plug } }
              - name: Patio
                sensors:
                  - { name: Temperature, rtl_433: { model: Bresser-6in1, id: 7 } }

        """

    static func unbound(_ port: Int, _ token: String) async throws -> [[String: Any]] {
        let reply = try await HTTP.send(port, "/api/v1/devices/unbound", method: "GET", token: token)
        guard reply.status == 200 else { throw TestFailure("unbound devices: \(reply.status) \(reply.text)") }
        return (GuestTests.object(reply)["devices"] as? [[String: Any]]) ?? []
    }

    /// Asks until `condition` holds for the list, for at most `timeout` seconds; the last list.
    static func unbound(_ port: Int, _ token: String, timeout: Double, until condition: ([[String: Any]]) -> Bool)
        async throws -> [[String: Any]]
    {
        let deadline = Date().addingTimeInterval(timeout)
        var devices = try await unbound(port, token)
        while !condition(devices), Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            devices = try await unbound(port, token)
        }
        return devices
    }

    @Test func adminsListUsersAndConfigUsersAreChangedInTheFile() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: DeviceBindingTests.settings(), extraUsers: Self.admin)
        let port = bridge.httpPort
        let admin = try await APITests.token(port, "Devon", "12345")
        let user = try await APITests.token(port, "Cemalettin", "12345")

        let list = try await HTTP.send(port, "/api/v1/users", method: "GET", token: admin)
        #expect(list.status == 200)
        let users = try #require(GuestTests.object(list)["users"] as? [[String: Any]])
        #expect(users.map { $0["username"] as? String } == ["Cemalettin", "Mehmet", "Devon"])
        #expect(users.map { $0["admin"] as? Bool } == [false, false, true])
        #expect(users[2]["rooms"] as? [String] == ["bedroom", "patio"])
        #expect(!list.text.contains("argon2id"), "no password hash in the list")

        for (method, body) in [("PUT", #"{"username":"Cem"}"#), ("DELETE", nil)] {
            let reply = try await HTTP.send(port, "/api/v1/users/1", method: method, body: body.map(APITests.json), token: admin)
            #expect(reply.status == 409, "\(method)")
            #expect(reply.text.contains(bridge.directory.appendingPathComponent("bridge.yaml").path), "\(reply.text)")
        }
        #expect(try await GuestTests.status(port, "GET", "/api/v1/users/9", admin) == 404)

        // Not an admin, or an admin's guest: 403 everywhere.
        let guest = try #require(try await GuestTests.create(port, owner: admin, rooms: ["patio"], access: "control")["token"] as? String)
        for token in [user, guest] {
            for (method, path) in [("GET", "/api/v1/users"), ("DELETE", "/api/v1/users/1"), ("GET", "/api/v1/devices/unbound")] {
                let status = try await GuestTests.status(port, method, path, token)
                #expect(status == 403, "\(method) \(path) answered \(status)")
            }
        }
        #expect(try await GuestTests.status(port, "GET", "/api/v1/users", "not-a-token") == 401)
    }

    /// A user an admin makes is kept in the database with an argon2id hash, logs in at once and after a
    /// restart; a new password ends its old tokens; removing it ends its tokens and login.
    @Test func adminsMakeChangeAndRemoveUsersOfTheirOwn() async throws {
        let broker = try await TestBroker()
        let folder = try TestFiles.makeDirectory("api-users")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = folder.appendingPathComponent("bridge.sqlite").path
        var first: BridgeProcess? = try await BridgeProcess(broker: broker, settings: DeviceBindingTests.settings(),
                                                            extraUsers: Self.admin, storagePath: storage)
        var port = first!.httpPort
        var admin = try await APITests.token(port, "Devon", "12345")
        let user = try await APITests.token(port, "Cemalettin", "12345")

        // Every problem named; a taken name (a config user's) 409; non-admins 403.
        let bad = try await HTTP.send(port, "/api/v1/users", method: "POST",
                                      body: APITests.json(#"{"username":"two words","password":"short","admin":"yes","rooms":[]}"#), token: admin)
        #expect(bad.status == 400)
        for message in [#"field \"rooms\" is not known"#, #"field \"username\" must not contain spaces"#,
                        #"field \"password\" must be at least 8 characters"#, #"field \"admin\" must be true or false"#] {
            #expect(bad.text.contains(message), "\(bad.text) lacks \(message)")
        }
        let taken = try await HTTP.send(port, "/api/v1/users", method: "POST",
                                        body: APITests.json(#"{"username":"Mehmet","password":"long enough"}"#), token: admin)
        #expect(taken.status == 409)
        #expect(taken.text.contains("is taken"))
        #expect(try await GuestTests.status(port, "POST", "/api/v1/users", user, body: #"{"username":"Eve","password":"long enough"}"#) == 403)

        let made = try await HTTP.send(port, "/api/v1/users", method: "POST",
                                       body: APITests.json(#"{"username":"Zeynep","password":"correct horse"}"#), token: admin)
        #expect(made.status == 201)
        let id = try #require(GuestTests.object(made)["id"] as? String)
        #expect(GuestTests.object(made)["source"] as? String == "api")
        #expect(GuestTests.object(made)["admin"] as? Bool == false)
        let zeynep = try await APITests.token(port, "Zeynep", "correct horse")
        let rooms = try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: zeynep)
        #expect(rooms.status == 200)
        #expect(try await GuestTests.status(port, "GET", "/api/v1/users", zeynep) == 403, "not an admin")
        let listed = GuestTests.object(try await HTTP.send(port, "/api/v1/users", method: "GET", token: admin))["users"] as? [[String: Any]]
        #expect(listed?.map { $0["source"] as? String } == ["config", "config", "config", "api"])

        // Kept with an argon2id hash, never the password.
        let rows = try Database(path: storage).query("SELECT username, password_hash FROM api_users")
        #expect(rows.count == 1)
        #expect(rows.first?[0].text == "Zeynep")
        let hash = rows.first?[1].text ?? ""
        #expect(hash.hasPrefix("$argon2id$"))
        #expect(hash.contains("correct horse") == false)

        // Survives a restart.
        first?.signal(SIGTERM)
        _ = first?.waitForExit(timeout: 10)
        first = nil
        let second = try await BridgeProcess(broker: broker, settings: DeviceBindingTests.settings(),
                                             extraUsers: Self.admin, storagePath: storage)
        port = second.httpPort
        admin = try await APITests.token(port, "Devon", "12345")
        #expect(try await GuestTests.status(port, "GET", "/api/v1/rooms", zeynep) == 200, "its token outlives the restart")

        // A new password: the old tokens and password stop working, the new one logs in; admin granted.
        let changed = try await HTTP.send(port, "/api/v1/users/\(id)", method: "PUT",
                                          body: APITests.json(#"{"password":"battery staple","admin":true}"#), token: admin)
        #expect(changed.status == 200)
        #expect(GuestTests.object(changed)["admin"] as? Bool == true)
        #expect(try await GuestTests.status(port, "GET", "/api/v1/rooms", zeynep) == 401)
        #expect(try await APITests.login(port, "Zeynep", "correct horse").status == 401)
        let again = try await APITests.token(port, "Zeynep", "battery staple")
        #expect(try await GuestTests.status(port, "GET", "/api/v1/users", again) == 200, "now an admin")
        #expect(try await GuestTests.status(port, "PUT", "/api/v1/users/\(id)", admin, body: "{}") == 400)

        // Removed: its token and login end; config users still can't be.
        #expect(try await GuestTests.status(port, "DELETE", "/api/v1/users/\(id)", admin) == 204)
        #expect(try await GuestTests.status(port, "GET", "/api/v1/rooms", again) == 401)
        #expect(try await APITests.login(port, "Zeynep", "battery staple").status == 401)
        #expect(try await GuestTests.status(port, "DELETE", "/api/v1/users/\(id)", admin) == 404)
        #expect(try await GuestTests.status(port, "DELETE", "/api/v1/users/3", admin) == 409)
        #expect(try Database(path: storage).query("SELECT id FROM api_users").isEmpty)
    }

    @Test func devicesNoBindingClaimsAreListedWithTheirLastPayloadBounded() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: DeviceBindingTests.settings(), extraUsers: Self.admin)
        let port = bridge.httpPort
        let admin = try await APITests.token(port, "Devon", "12345")
        let device = try await TestSubscriber(broker: broker, subscribe: ["smarthome/3/#"], name: "device")
        #expect(try await Self.unbound(port, admin).isEmpty)

        // Bound devices are read as before and not listed.
        try device.publish("zigbee2mqtt/bed_climate", #"{"temperature":21.5}"#)
        _ = try await device.waitFor("smarthome/3/bedroom/temperature", payload: "21.5")
        // A real Bresser 6-in-1 frame (id 411042499), decoded by Debian's rtl_433 and piped into
        // mosquitto_pub as rtl_433's MQTT output publishes it: not the bound id 7.
        let frame = "{205}55555555545ba999263100058631fffffe66d006092bffe0cff8"
        let script = "rtl_433 -F json -y '\(frame)' 2>/dev/null | mosquitto_pub -p \(broker.port) "
            + "-u '\(broker.username ?? "")' -P '\(broker.password ?? "")' -l -t rtl_433/testhost/events"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", broker.username == nil ? script.replacing("-u '' -P '' ", with: "") : script]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        // The bound plug's messages are claimed: its STATE (read for the light) and its SENSOR (read by nothing).
        try device.publish("tele/bed_plug/STATE", #"{"POWER":"ON","Wifi":{"RSSI":80}}"#)
        try device.publish("tele/bed_plug/SENSOR", #"{"ENERGY":{"Power":4}}"#)
        try device.publish("zigbee2mqtt/hall_motion", #"{"occupancy":true,"battery":100}"#)
        try device.publish("zigbee2mqtt/bridge", #"{"state":"online"}"#)
        try device.publish("tele/new_plug/SENSOR", #"{"ENERGY":{"Power":4}}"#)
        // The bound rtl_433 sensor's events are claimed, those without its field (wind only) too.
        try device.publish("rtl_433/testhost/events", #"{"model":"Bresser-6in1","id":7,"wind_avg_m_s":2.5}"#)
        try device.publish("rtl_433/testhost/events", #"{"model":"Bresser-6in1","id":7,"temperature_C":30.0}"#)
        _ = try await device.waitFor("smarthome/3/patio/temperature", payload: "30.0")

        let devices = try await Self.unbound(port, admin, timeout: 5) { $0.count == 3 }
        #expect(devices.count == 3, "listed: \(devices)")
        let byPreset = Dictionary(devices.map { ($0["preset"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        let zigbee = try #require(byPreset["zigbee2mqtt"])
        #expect(zigbee["topic"] as? String == "zigbee2mqtt/hall_motion")
        #expect(zigbee["payload"] as? String == #"{"occupancy":true,"battery":100}"#)
        #expect((zigbee["binding"] as? [String: [String: String]]) == ["zigbee2mqtt": ["device": "hall_motion"]])
        #expect((zigbee["lastSeen"] as? String).flatMap { try? Date($0, strategy: .iso8601) } != nil)
        let rtl = try #require(byPreset["rtl_433"])
        let binding = (rtl["binding"] as? [String: [String: String]])?["rtl_433"]
        #expect(binding?["model"] == "Bresser-6in1")
        #expect(binding?["id"] == "411042499")
        #expect((rtl["payload"] as? String)?.contains("\"id\" : 411042499") == true
            || (rtl["payload"] as? String)?.contains("411042499") == true)
        #expect((byPreset["tasmota"]?["binding"] as? [String: [String: String]]) == ["tasmota": ["topic": "new_plug"]])

        // A long payload is cut at 1024 bytes; a new message updates the device's entry.
        try device.publish("zigbee2mqtt/hall_motion", #"{"note":""# + String(repeating: "é", count: 2000) + #""}"#)
        let cut = try await Self.unbound(port, admin, timeout: 5) { list in
            (list.first { $0["topic"] as? String == "zigbee2mqtt/hall_motion" }?["payload"] as? String)?.hasPrefix(#"{"note":""#) == true
        }
        let payload = cut.first { $0["topic"] as? String == "zigbee2mqtt/hall_motion" }?["payload"] as? String ?? ""
        #expect(payload.hasPrefix(#"{"note":""#))
        #expect(payload.utf8.count <= 1024 && payload.utf8.count >= 1023, "\(payload.utf8.count) bytes, cut on a character")

        // At most 100 devices: the ones heard from longest ago go first.
        for index in 0..<110 {
            try device.publish("zigbee2mqtt/flood_\(index)", "{}")
        }
        let flooded = try await Self.unbound(port, admin, timeout: 10) { list in
            list.contains { $0["topic"] as? String == "zigbee2mqtt/flood_109" }
        }
        #expect(flooded.count == 100)
        let topics = Set(flooded.compactMap { $0["topic"] as? String })
        #expect(!topics.contains("zigbee2mqtt/hall_motion"), "the oldest were evicted")
        #expect(topics.contains("zigbee2mqtt/flood_109"))
        #expect(flooded.first?["topic"] as? String == "zigbee2mqtt/flood_109", "newest first")
        // The bound sensor still reads its device.
        try device.publish("zigbee2mqtt/bed_climate", #"{"temperature":19.0}"#)
        _ = try await device.waitFor("smarthome/3/bedroom/temperature", payload: "19.0")
    }

    /// Rooms changed while running (README, "Managing the home") never take the presets' filters
    /// away: after the only room binding an rtl_433 sensor is deleted, rtl_433 devices are still heard.
    @Test func aRoomThatGoesLeavesTheUnboundDevicesHeard() async throws {
        let broker = try await TestBroker()
        let admin = """
              - id: "3"
                username: Devon
                password_hash: "\(DeviceBindingTests.hash)"
                admin: true
                rooms: [Hall]

            """
        let bridge = try await BridgeProcess(broker: broker, settings: DeviceBindingTests.settings(), extraUsers: admin)
        let port = bridge.httpPort
        let token = try await APITests.token(port, "Devon", "12345")
        let device = try await TestSubscriber(broker: broker, subscribe: ["smarthome/3/#"], name: "device")
        let made = try await HTTP.send(port, "/api/v1/rooms", method: "POST", body: APITests.json(
            #"{"name":"Shed","sensors":[{"name":"Temperature","rtl_433":{"model":"Bresser-6in1","id":7}}]}"#), token: token)
        #expect(made.status == 201, "\(made.text)")
        try device.publish("rtl_433/testhost/events", #"{"model":"Bresser-6in1","id":7,"temperature_C":12.5}"#)
        _ = try await device.waitFor("smarthome/3/shed/temperature", payload: "12.5")
        #expect(try await Self.unbound(port, token).isEmpty, "the bound sensor's events are claimed")

        #expect(try await GuestTests.status(port, "DELETE", "/api/v1/rooms/shed", token) == 204)
        try device.publish("rtl_433/testhost/events", #"{"model":"Bresser-6in1","id":8,"temperature_C":13.5}"#)
        let devices = try await Self.unbound(port, token, timeout: 5) { !$0.isEmpty }
        #expect(devices.map { $0["topic"] as? String } == ["rtl_433/testhost/events"], "\(devices)")
        #expect(bridge.log.contains("devices rebound") && !bridge.log.contains("unsubscribed=1"), "\(bridge.log)")

        // A device bound from the list leaves it at once, the others stay until they are bound too.
        try device.publish("zigbee2mqtt/porch_motion", #"{"occupancy":false}"#)
        _ = try await Self.unbound(port, token, timeout: 5) { $0.count == 2 }
        let bound = try await HTTP.send(port, "/api/v1/rooms", method: "POST", body: APITests.json(
            #"{"name":"Porch","sensors":[{"name":"Movement","zigbee2mqtt":{"device":"porch_motion"}}]}"#), token: token)
        #expect(bound.status == 201, "\(bound.text)")
        #expect(try await Self.unbound(port, token).map { $0["topic"] as? String } == ["rtl_433/testhost/events"])
        let again = try await HTTP.send(port, "/api/v1/rooms", method: "POST", body: APITests.json(
            #"{"name":"Shed","sensors":[{"name":"Temperature","rtl_433":{"model":"Bresser-6in1","id":"8"}}]}"#), token: token)
        #expect(again.status == 201, "\(again.text)")
        #expect(try await Self.unbound(port, token).isEmpty)
        try device.publish("zigbee2mqtt/porch_motion", #"{"occupancy":true}"#)
        _ = try await device.waitFor("smarthome/3/porch/movement", payload: "ON")
        #expect(try await Self.unbound(port, token).isEmpty, "a bound device is not listed again")
    }
}
