import BridgeCrypto
import Foundation
import Testing

/// Groups (README, "Groups") through the built bridge on a real broker: MQTT commands for a group
/// and for every light, the groups' retained states, the API route, alarm actions on a group and
/// on every light, and the groups' Home Assistant lights.
@Suite(.timeLimit(.minutes(2)))
struct GroupTests {
    /// A user with a group of two of its three rooms with lights (the attic has none).
    static let groupUser: String = {
        let hash = (try? PasswordHasher.hash(password: "zeynep-pass")) ?? ""
        return """
              - id: "4"
                username: Zeynep
                password_hash: "\(hash)"
                rooms: [Kitchen, Livingroom, Bedroom, { name: Attic, sensors: [Temperature] }]
                groups:
                  - { name: downstairs, rooms: [Kitchen, Livingroom] }

            """
    }()

    static let rooms = ["kitchen", "livingroom", "bedroom"]

    func waitForLights(_ watcher: TestSubscriber, _ want: [String: String]) async throws {
        let reached = await eventually(timeout: 10) {
            want.allSatisfy { watcher.last("smarthome/4/\($0.key)/lights") == $0.value }
        }
        #expect(reached, "lights \(Self.rooms.map { watcher.last("smarthome/4/\($0)/lights") ?? "-" }), want \(want)")
    }

    /// Waits until the last message on `topic` says `payload` (earlier ones may have said it too).
    func waitForState(_ watcher: TestSubscriber, _ topic: String, _ payload: String) async {
        let reached = await eventually(timeout: 10) { watcher.last(topic) == payload }
        #expect(reached, "\(topic) is \(watcher.last(topic) ?? "-"), want \(payload)")
    }

    @Test func groupAndEveryLightCommandsOverMQTT() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, extraUsers: Self.groupUser)
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/4/#"])
        // Retained at start: every light off, so both states OFF.
        try await watcher.waitFor { $0.retain && $0.topic == "smarthome/4/groups/downstairs" && $0.text == "OFF" }
        try await watcher.waitFor { $0.retain && $0.topic == "smarthome/4/lights" && $0.text == "OFF" }

        try watcher.publish("smarthome/4/groups/downstairs/set", "ON")
        try await waitForLights(watcher, ["kitchen": "ON", "livingroom": "ON"])
        await waitForState(watcher, "smarthome/4/groups/downstairs", "ON")
        #expect(watcher.last("smarthome/4/bedroom/lights") == "OFF", "a room outside the group is untouched")
        #expect(watcher.last("smarthome/4/lights") == "OFF", "not every light is on")

        // TOGGLE of every light while some are on: all on.
        try watcher.publish("smarthome/4/lights/set", "TOGGLE")
        try await waitForLights(watcher, ["kitchen": "ON", "livingroom": "ON", "bedroom": "ON"])
        await waitForState(watcher, "smarthome/4/lights", "ON")
        try watcher.publish("smarthome/4/groups/downstairs/set", #"{"state":"TOGGLE"}"#)
        try await waitForLights(watcher, ["kitchen": "OFF", "livingroom": "OFF", "bedroom": "ON"])
        await waitForState(watcher, "smarthome/4/groups/downstairs", "OFF")

        // A group command arrives once (through the room filter): one rejection for an unknown group.
        try watcher.publish("smarthome/4/groups/upstairs/set", "ON")
        try await watcher.waitFor { $0.topic == "smarthome/4/events" && $0.text.contains(#""reason":"unknown_group""#) }
        try await Task.sleep(for: .milliseconds(300))
        #expect(watcher.messages.filter { $0.topic == "smarthome/4/events" }.count == 1)
        #expect(await bridge.waitForLog("reason=unknown_group"))
    }

    @Test func groupLightsThroughTheAPIAndAlarms() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, extraUsers: Self.groupUser)
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/4/#"])
        let token = try await APITests.token(bridge.httpPort, "Zeynep", "zeynep-pass")
        let switched = try await HTTP.send(bridge.httpPort, "/api/v1/groups/downstairs/lights", method: "POST",
                                           body: Data(#"{"state":"TOGGLE"}"#.utf8), token: token)
        #expect(switched.status == 200)
        let body = AlarmsAndHistoryTests.object(switched)
        #expect(body["group"] as? String == "downstairs")
        #expect(body["state"] as? String == "ON")
        #expect((body["rooms"] as? [[String: String]]) == [["room": "kitchen", "lights": "ON"],
                                                             ["room": "livingroom", "lights": "ON"]])
        await waitForState(watcher, "smarthome/4/groups/downstairs", "ON")
        for (path, body, status) in [("/api/v1/groups/upstairs/lights", #"{"state":"ON"}"#, 404),
                                     ("/api/v1/groups/downstairs/lights", #"{"state":"DIM"}"#, 400)] {
            let reply = try await HTTP.send(bridge.httpPort, path, method: "POST", body: Data(body.utf8), token: token)
            #expect(reply.status == status, "\(path) \(body)")
        }
        let other = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let foreign = try await HTTP.send(bridge.httpPort, "/api/v1/groups/downstairs/lights", method: "POST",
                                          body: Data(#"{"state":"ON"}"#.utf8), token: other)
        #expect(foreign.status == 404, "another user's group is not found")

        // Alarm actions on the group and on every light; a group that isn't the user's is refused.
        let refused = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST",
                                          body: AlarmsAndHistoryTests.alarmBody("x", at: Date(timeIntervalSinceNow: 600),
                                                                                action: #"{"group":"upstairs","lights":"OFF"}"#),
                                          token: token)
        #expect(refused.status == 400)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("action.group"))
        let groupAlarm = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST",
                                             body: AlarmsAndHistoryTests.alarmBody("Downstairs off", at: Date(timeIntervalSinceNow: 2),
                                                                                   action: #"{"group":"downstairs","lights":"OFF"}"#),
                                             token: token)
        #expect(groupAlarm.status == 201)
        #expect((AlarmsAndHistoryTests.object(groupAlarm)["action"] as? [String: String]) == ["group": "downstairs", "lights": "OFF"])
        try await waitForLights(watcher, ["kitchen": "OFF", "livingroom": "OFF"])
        let everyAlarm = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST",
                                             body: AlarmsAndHistoryTests.alarmBody("All on", at: Date(timeIntervalSinceNow: 2),
                                                                                   action: #"{"room":"*","lights":"ON"}"#),
                                             token: token)
        #expect(everyAlarm.status == 201)
        let uuid = try #require(AlarmsAndHistoryTests.object(everyAlarm)["uuid"] as? String)
        try await waitForLights(watcher, ["kitchen": "ON", "livingroom": "ON", "bedroom": "ON"])
        await waitForState(watcher, "smarthome/4/lights", "ON")
        let stored = try await HTTP.send(bridge.httpPort, "/api/v1/alarms/\(uuid)", method: "GET", token: token)
        #expect((AlarmsAndHistoryTests.object(stored)["action"] as? [String: String]) == ["room": "*", "lights": "ON"])
    }

    @Test func eachGroupAndEveryLightIsAHomeAssistantLight() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, extraUsers: Self.groupUser)
        _ = bridge
        let topics = ["homeassistant/light/smarthome_4_home/lights/config",
                      "homeassistant/light/smarthome_4_home/group_downstairs/config"]
        let watcher = try await TestSubscriber(broker: broker, subscribe: topics)
        try await watcher.waitFor { _ in Set(watcher.messages.filter(\.retain).map(\.topic)).count == 2 }
        let group = try #require(watcher.last(topics[1]))
        let fields = try #require(try JSONSerialization.jsonObject(with: Data(group.utf8)) as? [String: Any])
        #expect(fields["command_topic"] as? String == "smarthome/4/groups/downstairs/set")
        #expect(fields["state_topic"] as? String == "smarthome/4/groups/downstairs")
        #expect(fields["default_entity_id"] as? String == "light.smarthome_4_home_group_downstairs")
        #expect(fields["object_id"] == nil)
        #expect((fields["device"] as? [String: Any])?["via_device"] as? String == "smarthome_bridge")
        #expect(watcher.last(topics[0])?.contains(#""command_topic":"smarthome/4/lights/set""#) == true)
    }
}
