import Foundation
import Testing

/// Rooms made, changed and deleted through the API while the bridge runs (README, "Managing the
/// home"), with the real executable, a real broker and the database file across a restart.
@Suite(.timeLimit(.minutes(3)))
struct ManagedRoomsTests {
    static let office = #"{"name":"Office","sensors":["Temperature",{"name":"Lights","tasmota":{"topic":"office_lamp"}}]}"#
    static let officeTopics = ["smarthome/1/office/temperature", "smarthome/1/office/lights", "smarthome/1/office",
                               "smarthome/1/office/availability"]
    static let officeConfigs = ["homeassistant/sensor/smarthome_1_office/temperature/config",
                                "homeassistant/light/smarthome_1_office/lights/config"]

    static func object(_ reply: HTTP.Reply) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: reply.body)) as? [String: Any] ?? [:]
    }

    static func historyCount(_ port: Int, _ token: String, room: String) async throws -> Int {
        let reply = try await HTTP.send(port, "/api/v1/rooms/\(room)/history?sensor=temperature", method: "GET", token: token)
        return (object(reply)["points"] as? [Any])?.count ?? -1
    }

    @Test func aRoomMadeThroughTheAPIIsPublishedBoundRenamedDeletedAndKept() async throws {
        let broker = try await TestBroker()
        let storage = try TestFiles.makeDirectory("rooms").appendingPathComponent("bridge.sqlite").path
        var bridge: BridgeProcess? = try await BridgeProcess(broker: broker, extraUsers: APITests.thirdUser,
                                                             storagePath: storage)
        var port = bridge!.httpPort
        var token = try await APITests.token(port, "Cemalettin", "12345")
        let watcher = try await TestSubscriber(broker: broker, subscribe: Self.officeTopics + Self.officeConfigs)

        // Created: 201 with the room's seed shape; its topics, seed route and configs appear at once.
        let created = try await HTTP.send(port, "/api/v1/rooms", method: "POST", body: APITests.json(Self.office), token: token)
        #expect(created.status == 201, "\(created.text)")
        #expect(created.text.hasPrefix(#"{"SensorNames":["Temperature","Lights"]"#), "\(created.text)")
        // (The bound light has no value until its device reports.)
        for topic in Self.officeTopics + Self.officeConfigs where topic != "smarthome/1/office/lights" {
            try await watcher.waitFor(topic)
        }
        #expect(watcher.last("smarthome/1/office/availability") == "online")
        #expect(watcher.last(Self.officeConfigs[1])?.contains(#""command_topic":"smarthome/1/office/lights/set""#) == true)
        #expect(try await HTTP.get(port, "/rooms/1/Office").status == 200)
        #expect(try await HTTP.get(port, "/rooms/1").text.contains("Office"))
        // The settings page's list: every room with its origin and sensors as a body takes them;
        // the seed-shaped list stays the legacy route's.
        let detail = try await HTTP.send(port, "/api/v1/rooms?detail=1", method: "GET", token: token)
        #expect(detail.status == 200)
        #expect(detail.text.contains(#"{"id":"office","name":"Office","origin":"api","sensors":["Temperature",{"name":"Lights","tasmota":{"topic":"office_lamp"}}]}"#), "\(detail.text)")
        #expect(detail.text.contains(#"{"id":"kitchen","name":"Kitchen","origin":"file","sensors":["#), "\(detail.text)")
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "GET", token: token).text
            == (try await HTTP.get(port, "/rooms/1").text))

        // The bound light is the device's: the device source subscribed its topics live.
        let device = try await TestSubscriber(broker: broker, subscribe: ["cmnd/office_lamp/POWER"], name: "lamp")
        try device.publish("stat/office_lamp/POWER", "ON")
        try await watcher.waitFor("smarthome/1/office/lights", payload: "ON")
        try watcher.publish("smarthome/1/office/lights/set", "OFF")
        try await device.waitFor("cmnd/office_lamp/POWER", payload: "OFF")

        // Problems: every one with its path, 400, nothing made.
        let bad = try await HTTP.send(port, "/api/v1/rooms", method: "POST", body: APITests.json(
            #"{"name":"Lab","sensors":["Temprature",{"name":"Lights","tasmota":{}}]}"#), token: token)
        #expect(bad.status == 400)
        let problems = ((Self.object(bad)["error"] as? [String: Any])?["problems"] as? [[String: Any]]) ?? []
        #expect(problems.compactMap { $0["path"] as? String } == ["sensors[0]", "sensors[1].tasmota.topic"], "\(bad.text)")
        #expect(try await HTTP.send(port, "/api/v1/rooms/lab", method: "GET", token: token).status == 404)
        // The same name again, a room of the config file, another user's room.
        #expect(try await HTTP.send(port, "/api/v1/rooms", method: "POST", body: APITests.json(Self.office), token: token)
            .status == 409)
        let fileRoom = try await HTTP.send(port, "/api/v1/rooms/kitchen", method: "PUT", body: APITests.json(#"{"name":"Cookery"}"#), token: token)
        #expect(fileRoom.status == 409)
        #expect(fileRoom.text.contains("bridge.yaml"), "\(fileRoom.text)")
        #expect(try await HTTP.send(port, "/api/v1/rooms/kitchen", method: "DELETE", token: token).status == 409)
        let ayse = try await APITests.token(port, "Ayse", "attic-pass")
        #expect(try await HTTP.send(port, "/api/v1/rooms/office", method: "DELETE", token: ayse).status == 404)
        #expect(try await HTTP.send(port, "/api/v1/rooms/office", method: "PUT", body: APITests.json(#"{"name":"Mine"}"#), token: ayse).status == 404)

        // Renamed: the id, the topics and the history stay.
        var recorded = 0
        for _ in 0..<50 where recorded == 0 {
            recorded = try await Self.historyCount(port, token, room: "office")
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(recorded > 0, "the office's temperature is recorded")
        watcher.clear()
        let renamed = try await HTTP.send(port, "/api/v1/rooms/office", method: "PUT", body: APITests.json(#"{"name":"Study"}"#), token: token)
        #expect(renamed.status == 200, "\(renamed.text)")
        try await watcher.waitFor { $0.topic == Self.officeConfigs[0] && $0.text.contains("Cemalettin Study") }
        #expect(try await Self.historyCount(port, token, room: "study") >= recorded)
        #expect(try await HTTP.send(port, "/api/v1/rooms/study", method: "GET", token: token).status == 200)
        #expect((try await HTTP.get(port, "/rooms/1").text).contains("Study"))

        // Kept across a restart.
        bridge?.signal(SIGTERM)
        #expect(bridge?.waitForExit(timeout: 10) == 0)
        bridge = nil
        bridge = try await BridgeProcess(broker: broker, extraUsers: APITests.thirdUser, storagePath: storage)
        port = bridge!.httpPort
        token = try await APITests.token(port, "Cemalettin", "12345")
        let kept = try await HTTP.send(port, "/api/v1/rooms/study", method: "GET", token: token)
        #expect(kept.status == 200)
        #expect(kept.text.hasPrefix(#"{"SensorNames":["Temperature","Lights"]"#))

        // Deleted: 204, retained topics and configs cleared, the device no longer read.
        let deleted = try await HTTP.send(port, "/api/v1/rooms/study", method: "DELETE", token: token)
        #expect(deleted.status == 204)
        #expect(try await HTTP.send(port, "/api/v1/rooms/study", method: "GET", token: token).status == 404)
        try await Task.sleep(for: .milliseconds(500))
        let late = try await TestSubscriber(broker: broker, subscribe: Self.officeTopics + Self.officeConfigs, name: "late")
        try late.publish("stat/office_lamp/POWER", "ON")
        try await Task.sleep(for: .seconds(1))
        #expect(late.messages.filter { !$0.payload.isEmpty }.map(\.topic) == [],
                "nothing retained or published for the deleted room")
        #expect(bridge!.log.contains("rooms changed added=0 removed=1"))
    }

    /// With `devices.mqtt.url` the devices' own connection is made once a room made through the API
    /// binds a sensor, and it reads the new device.
    @Test(.enabled(if: TestBrokerKind.current == .mosquitto))
    func aBoundRoomMadeWhileRunningIsReadOnTheDevicesOwnBroker() async throws {
        let broker = try await TestBroker()
        let devices = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_DEVICES_MQTT_URL": devices.url])
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/1/cellar/temperature"])
        let body = #"{"name":"Cellar","sensors":[{"name":"Temperature","mqtt":{"topic":"cellar/t"}}]}"#
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/rooms", method: "POST", body: APITests.json(body),
                                    token: token).status == 201)
        let device = try await TestSubscriber(broker: devices, name: "device")
        // The bridge subscribes on its new connection: publish until a reading arrives.
        for value in 0..<50 where watcher.last("smarthome/1/cellar/temperature") == nil {
            try device.publish("cellar/t", "1\(value).5")
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(watcher.last("smarthome/1/cellar/temperature") != nil, "\(bridge.log)")
    }
}
