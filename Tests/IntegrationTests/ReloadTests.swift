import BridgeCrypto
import Foundation
import Testing

/// Reload (README, "Managing the home"): SIGHUP and the `config/reload` request apply a valid
/// config file as a diff on the same MQTT connection; a broken one changes nothing.
@Suite(.timeLimit(.minutes(3)))
struct ReloadTests {
    /// A third user with a room whose temperature is read from a device topic.
    static func boundUser(topic: String) -> String {
        """
          - id: "3"
            username: Ayse
            password_hash: "$argon2id$v=19$m=65536,t=2,p=1$AFwYLl14V6VLFBq3mN1oNA$z0YImiO0MUlUwjAJcNkvPZsytpsLsNbqpDuYtqrpMOU"
            rooms:
              - { name: Attic, sensors: [Humidity, { name: Temperature, mqtt: { topic: \(topic) } }] }

        """
    }

    static let cemalettinsRooms = "    rooms: [Livingroom, Bathroom, Bedroom, Kitchen, Garden, Saloon, Babyroom, Balcony]\n"

    @Test func aValidFileIsAppliedOnTheSameConnectionAndABrokenOneChangesNothing() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, extraUsers: Self.boundUser(topic: "attic/old"))
        let configFile = bridge.directory.appendingPathComponent("bridge.yaml")
        let original = try String(contentsOf: configFile, encoding: .utf8)
        #expect(original.contains(Self.cemalettinsRooms))
        let watched = ["smarthome/bridge/state", "smarthome/1/office", "smarthome/1/office/temperature",
                       "homeassistant/sensor/smarthome_1_office/temperature/config", "smarthome/1/balcony",
                       "homeassistant/sensor/smarthome_1_balcony/temperature/config", "smarthome/3/attic/temperature", "smarthome/1/livingroom/availability"]
        let watcher = try await TestSubscriber(broker: broker, subscribe: watched)
        try await watcher.waitFor("smarthome/bridge/state", payload: "online")
        try await watcher.waitFor("smarthome/1/balcony")
        try watcher.publish("attic/old", "20.5")
        try await watcher.waitFor("smarthome/3/attic/temperature", payload: "20.5")

        // Office added, Balcony removed, the attic's thermometer moved to another topic.
        let edited = original
            .replacingOccurrences(of: Self.cemalettinsRooms, with: """
                    rooms: [Livingroom, Bathroom, Bedroom, Kitchen, Garden, Saloon, Babyroom, { name: Office, sensors: [Temperature] }]

                """)
            .replacingOccurrences(of: "mqtt: { topic: attic/old }", with: "mqtt: { topic: attic/new }")
            + """
              - id: "4"
                username: Zeynep
                password_hash: "\(try PasswordHasher.hash(password: "cellar-pass"))"
                rooms: [Cellar]

            """
        try edited.write(to: configFile, atomically: true, encoding: .utf8)
        bridge.signal(SIGHUP)
        #expect(await bridge.waitForLog("config reloaded added=2 removed=1 changed=1"), "\(bridge.log)")
        try await watcher.waitFor("smarthome/1/office")
        try await watcher.waitFor("homeassistant/sensor/smarthome_1_office/temperature/config")
        try await watcher.waitFor { $0.topic == "smarthome/1/balcony" && $0.payload.isEmpty }
        try await watcher.waitFor { $0.topic == "homeassistant/sensor/smarthome_1_balcony/temperature/config"
            && $0.payload.isEmpty }
        try watcher.publish("attic/old", "30.5")
        try watcher.publish("attic/new", "21.5")
        try await watcher.waitFor("smarthome/3/attic/temperature", payload: "21.5")
        #expect(watcher.last("smarthome/3/attic/temperature") == "21.5", "the old topic is no longer read")
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/1/Office").status == 200)
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/1/Balcony").status == 404)
        // A user the file gained logs in and is served.
        let zeynep = try await APITests.token(bridge.httpPort, "Zeynep", "cellar-pass")
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/rooms/cellar", method: "GET", token: zeynep).status == 200)

        // The same connection: connected once, the retained state published once, `online` once.
        #expect(bridge.log.components(separatedBy: "connected to broker").count - 1 == 1)
        #expect(bridge.log.components(separatedBy: "published retained state").count - 1 == 1)
        #expect(watcher.messages.filter { $0.topic == "smarthome/bridge/state" }.map(\.text) == ["online"])
        #expect(!watcher.messages.contains { $0.topic.hasSuffix("/availability") && $0.text != "online" },
                "no room went unavailable, so no Home Assistant entity did")
        #expect(!bridge.log.contains("take effect only after a restart"), "only users changed")

        // A broken file changes nothing; every problem is logged and, asked over MQTT, returned.
        let broken = edited.replacingOccurrences(of: "{ name: Office, sensors: [Temperature] }",
                                                 with: "{ name: Office, sensors: [Temprature] }, { name: Shed, colour: red }")
            .replacingOccurrences(of: "mqtt: { topic: attic/new }", with: "mqtt: { topic: attic/broken }")
        try broken.write(to: configFile, atomically: true, encoding: .utf8)
        let requests = try await TestSubscriber(broker: broker, subscribe: ["smarthome/bridge/response/config/reload"])
        try requests.publish("smarthome/bridge/request/config/reload", #"{"transaction":"r1"}"#)
        let answer = try await requests.waitFor("smarthome/bridge/response/config/reload")
        let reply = (try JSONSerialization.jsonObject(with: Data(answer.text.utf8))) as? [String: Any] ?? [:]
        #expect(reply["status"] as? String == "error")
        #expect(reply["transaction"] as? String == "r1")
        #expect((reply["error"] as? String)?.contains("nothing was changed") == true)
        let paths = ((reply["data"] as? [String: Any])?["problems"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        #expect(paths == ["users[0].rooms[7].sensors[0]", "users[0].rooms[8].colour"], "\(answer.text)")
        #expect(bridge.log.contains("config reload: problem in the file; nothing was changed problem=\"users[0].rooms[8].colour"))
        bridge.signal(SIGHUP)
        #expect(await bridge.waitForLog("received signal, reloading the config file"))
        try await Task.sleep(for: .milliseconds(500))
        #expect(bridge.log.components(separatedBy: "config reload: problem in the file").count - 1 == 4)
        try watcher.publish("attic/new", "22.5")
        try await watcher.waitFor("smarthome/3/attic/temperature", payload: "22.5")
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/1/Office").status == 200)

        // A setting outside users is named as needing a restart; the rest is still applied.
        try edited.replacingOccurrences(of: "  interval: 0.2\n", with: "  interval: 0.5\n")
            .write(to: configFile, atomically: true, encoding: .utf8)
        try requests.publish("smarthome/bridge/request/config/reload", #"{"transaction":"r2"}"#)
        let again = try await requests.waitFor { $0.text.contains(#""transaction":"r2""#) }
        let applied = (try JSONSerialization.jsonObject(with: Data(again.text.utf8))) as? [String: Any] ?? [:]
        #expect(applied["status"] as? String == "ok", "\(again.text)")
        #expect((applied["data"] as? [String: Any])?["restartNeeded"] as? [String] == ["source"], "\(again.text)")
        #expect(bridge.log.contains("config reload: these settings take effect only after a restart settings=source"))
    }

    /// A user an admin made through the API is not the file's: it stays through a reload, with the
    /// room it made, its token and its login (README, "Reload"); removing it clears its room.
    @Test func aUserMadeThroughTheAPISurvivesAReload() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: DeviceBindingTests.settings(), extraUsers: AdminTests.admin)
        let port = bridge.httpPort
        let admin = try await APITests.token(port, "Devon", "12345")
        let made = try await HTTP.send(port, "/api/v1/users", method: "POST",
                                       body: APITests.json(#"{"username":"Zeynep","password":"correct horse"}"#), token: admin)
        #expect(made.status == 201, "\(made.text)")
        let id = try #require(GuestTests.object(made)["id"] as? String)
        let zeynep = try await APITests.token(port, "Zeynep", "correct horse")
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(id)/cellar"])
        let room = try await HTTP.send(port, "/api/v1/rooms", method: "POST",
                                       body: APITests.json(#"{"name":"Cellar","sensors":["Temperature"]}"#), token: zeynep)
        #expect(room.status == 201, "\(room.text)")
        try await watcher.waitFor { $0.topic == "smarthome/\(id)/cellar" && !$0.payload.isEmpty }

        bridge.signal(SIGHUP)
        #expect(await bridge.waitForLog("config reloaded added=0 removed=0 changed=0"), "\(bridge.log)")
        let listed = GuestTests.object(try await HTTP.send(port, "/api/v1/users", method: "GET", token: admin))["users"]
            as? [[String: Any]] ?? []
        #expect(listed.contains { $0["id"] as? String == id && $0["source"] as? String == "api" }, "\(listed)")
        #expect(try await HTTP.send(port, "/api/v1/rooms/cellar", method: "GET", token: zeynep).status == 200,
                "its token still works")
        let again = try await APITests.token(port, "Zeynep", "correct horse")
        #expect(try await HTTP.send(port, "/api/v1/rooms/cellar", method: "GET", token: again).status == 200)
        #expect(!watcher.messages.contains { $0.topic == "smarthome/\(id)/cellar" && $0.payload.isEmpty },
                "its room was not cleared")

        // Removing the user removes its room: the room's topic is cleared.
        #expect(try await GuestTests.status(port, "DELETE", "/api/v1/users/\(id)", admin) == 204)
        try await watcher.waitFor { $0.topic == "smarthome/\(id)/cellar" && $0.payload.isEmpty }
        #expect(try await HTTP.send(port, "/api/v1/rooms/cellar", method: "GET", token: again).status == 401)
    }
}
