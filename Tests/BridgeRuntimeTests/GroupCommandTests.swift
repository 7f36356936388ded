import BridgeCore
import BridgeMQTT
import Foundation
import Testing
@testable import BridgeRuntime

/// Group commands and states (README, "Groups"), without a broker.
@Suite struct GroupCommandTests {
    static let groups = [LightGroup(name: "downstairs", rooms: ["kitchen", "hall"]), LightGroup(name: "cooking", rooms: ["kitchen"])]

    static func message(_ topic: String, _ payload: String, redelivery: Bool = false) -> MQTTMessage {
        MQTTMessage(topic: topic, payload: Array(payload.utf8), qos: 1, retain: false, messageID: 3, isRedelivery: redelivery)
    }

    func lights(_ bridge: RuntimeFixture) -> [String: Bool] {
        let home = bridge.store.home
        var found: [String: Bool] = [:]
        for room in ["kitchen", "hall"] {
            found[room] = home.value(of: .lights, in: RoomKey(user: "1", room: room)) == .binary(true)
        }
        return found
    }

    /// The latest payload published on each topic.
    func last(_ published: [MemoryBroker.Published]) -> [String: String] {
        Dictionary(published.map { ($0.topic, $0.payload) }, uniquingKeysWith: { _, later in later })
    }

    @Test func theGroupTopicReachesTheCommandServiceThroughTheRoomFilterOnce() {
        let bridge = RuntimeFixture(groups: Self.groups)
        let subscriptions = bridge.commands.subscriptions.map(\.filter)
        #expect(subscriptions == ["smarthome/+/+/+/set", "smarthome/+/lights/set"])
        let filters = subscriptions.filter { MQTTTopicFilter.matches($0, topic: "smarthome/1/groups/downstairs/set") }
        #expect(filters == ["smarthome/+/+/+/set"])
        #expect(subscriptions.filter { MQTTTopicFilter.matches($0, topic: "smarthome/1/lights/set") } == ["smarthome/+/lights/set"])
    }

    @Test func aGroupCommandSwitchesItsRoomsAndPublishesItsState() {
        let bridge = RuntimeFixture(groups: Self.groups)
        bridge.commands.handle(Self.message("smarthome/1/groups/cooking/set", "ON"))
        #expect(lights(bridge) == ["kitchen": true, "hall": false])
        var sent = last(bridge.broker.take())
        #expect(sent["smarthome/1/kitchen/lights"] == "ON")
        #expect(sent["smarthome/1/hall/lights"] == nil)
        #expect(sent["smarthome/1/groups/cooking"] == "ON")
        #expect(sent["smarthome/1/groups/downstairs"] == "OFF")
        #expect(sent["smarthome/1/lights"] == "OFF")

        bridge.commands.handle(Self.message("smarthome/1/groups/downstairs/set", #"{"state":"ON"}"#))
        #expect(lights(bridge) == ["kitchen": true, "hall": true])
        sent = last(bridge.broker.take())
        #expect(sent["smarthome/1/hall/lights"] == "ON")
        #expect(sent["smarthome/1/groups/downstairs"] == "ON")
        #expect(sent["smarthome/1/lights"] == "ON")
        #expect(sent["smarthome/1/groups/cooking"] == nil, "unchanged states are not sent again")
    }

    /// TOGGLE of a group: `OFF` when every light of it is on, else `ON` for all of them (never
    /// each room flipped on its own, which would leave a mixed group mixed).
    @Test func aGroupToggleSwitchesAllOnUnlessAllAreOn() {
        let bridge = RuntimeFixture(groups: Self.groups)
        bridge.commands.handle(Self.message("smarthome/1/kitchen/lights/set", "ON"))
        bridge.commands.handle(Self.message("smarthome/1/groups/downstairs/set", "toggle"))
        #expect(lights(bridge) == ["kitchen": true, "hall": true])
        bridge.commands.handle(Self.message("smarthome/1/groups/downstairs/set", "TOGGLE"))
        #expect(lights(bridge) == ["kitchen": false, "hall": false])
        bridge.commands.handle(Self.message("smarthome/1/groups/downstairs/set", "TOGGLE", redelivery: true))
        #expect(lights(bridge) == ["kitchen": false, "hall": false], "a redelivered TOGGLE is not applied again")
    }

    @Test func everyLightOfTheUser() {
        let bridge = RuntimeFixture(groups: Self.groups)
        bridge.commands.handle(Self.message("smarthome/1/lights/set", "ON"))
        #expect(lights(bridge) == ["kitchen": true, "hall": true])
        #expect(bridge.store.home.value(of: .lights, in: RoomKey(user: "2", room: "kitchen")) == nil, "only user 1's")
        #expect(last(bridge.broker.take())["smarthome/1/lights"] == "ON")
        bridge.commands.handle(Self.message("smarthome/1/lights/set", "OFF"))
        #expect(lights(bridge) == ["kitchen": false, "hall": false])
    }

    @Test(arguments: [("smarthome/1/groups/upstairs/set", "ON", "unknown_group"),
                      ("smarthome/1/groups/downstairs/set", "DIM", "bad_payload"),
                      ("smarthome/1/lights/set", "{}", "bad_payload")])
    func aBadGroupCommandIsOneRejectionEvent(topic: String, payload: String, reason: String) {
        let bridge = RuntimeFixture(groups: Self.groups)
        bridge.commands.handle(Self.message(topic, payload))
        let published = bridge.broker.take()
        #expect(published.count == 1, "\(published)")
        #expect(published.first?.topic == "smarthome/1/events")
        #expect(published.first?.payload.contains(#""reason":"\#(reason)""#) == true, "\(published)")
        #expect(published.first?.payload.contains(#""topic":"\#(topic)""#) == true, "\(published)")
        #expect(lights(bridge) == ["kitchen": false, "hall": false])
    }

    @Test func allGroupStatesAreSentRetainedAtEachConnect() {
        let bridge = RuntimeFixture(groups: Self.groups)
        bridge.groupStates?.connected()
        let published = bridge.broker.take()
        #expect(published.allSatisfy { $0.retain })
        #expect(last(published) == ["smarthome/1/lights": "OFF", "smarthome/1/groups/downstairs": "OFF",
                                    "smarthome/1/groups/cooking": "OFF", "smarthome/2/lights": "OFF"])
    }

    @Test func anAPIGroupCommandWaitsForEveryRoom() async {
        let lamp = RecordingSwitch(answer: .success(.accepted))
        let bridge = RuntimeFixture(lights: lamp, groups: Self.groups)
        let task = Task { await bridge.commands.run() }
        defer { task.cancel() }
        let commands = bridge.commands
        let outcome = await CommandRulesTests.onThread { commands.switchGroupAndWait(.toggle, user: "1", group: "downstairs") }
        #expect(outcome == .success([Reading(user: "1", room: "kitchen", sensor: .lights, value: .binary(true)),
                                     Reading(user: "1", room: "hall", sensor: .lights, value: .binary(true))]))
        #expect(lamp.calls == [true, true])
        let unknown = await CommandRulesTests.onThread { commands.switchGroupAndWait(.on, user: "1", group: "attic") }
        #expect(unknown == .failure(.unknownGroup(user: "1", group: "attic")))
    }
}
