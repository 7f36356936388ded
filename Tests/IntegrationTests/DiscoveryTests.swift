import Foundation
import Testing

/// Home Assistant discovery on a real broker: configs, the birth message, stale configs, the prefix.
@Suite(.timeLimit(.minutes(2)))
struct DiscoveryTests {
    static func configs(_ subscriber: TestSubscriber, prefix: String = "homeassistant") -> [String: String] {
        var found: [String: String] = [:]
        for message in subscriber.messages where message.topic.hasPrefix(prefix + "/") && message.topic.hasSuffix("/config") {
            found[message.topic] = message.text
        }
        return found
    }

    @Test func everyEntityIsAnnouncedRetainedAndStaleOnesAreCleared() async throws {
        let broker = try await TestBroker()
        let setup = try await TestSubscriber(broker: broker.port)
        // Left over from an earlier run of this bridge (a room since removed), and another bridge's.
        let stale = "homeassistant/sensor/smarthome_1_attic/temperature/config"
        let foreign = "homeassistant/sensor/upstairs_1_attic/temperature/config"
        try setup.publish(stale, #"{"unique_id":"smarthome_1_attic_temperature","device":{"via_device":"smarthome_bridge"}}"#,
                          retain: true)
        try setup.publish(foreign, #"{"unique_id":"upstairs_1_attic_temperature","device":{"via_device":"upstairs_bridge"}}"#,
                          retain: true)
        #expect(await setup.client.waitForPublished(timeout: 5))

        let bridge = try await BridgeProcess(broker: broker)
        #expect(await bridge.waitForLog("cleared stale Home Assistant configs count=1"))
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["homeassistant/#"])
        try await watcher.waitFor { _ in Self.configs(watcher).count >= 66 }
        try await Task.sleep(for: .milliseconds(300))
        let found = Self.configs(watcher)
        #expect(found.count == 66, "64 room entities, the bridge's connectivity sensor and the foreign one")
        #expect(found[stale] == nil, "the removed room's config was cleared")
        #expect(found[foreign] != nil, "another bridge's config is left alone")
        #expect(found["homeassistant/light/smarthome_2_bedroom/lights/config"]?.contains(#""command_topic":"smarthome/2/bedroom/lights/set""#) == true)
        #expect(watcher.messages.allSatisfy { $0.retain })
    }

    @Test func theBirthMessageGetsEverythingRepublished() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["homeassistant/+/+/+/config", "smarthome/1/kitchen/temperature"])
        try await watcher.waitFor { _ in Self.configs(watcher).count >= 65 }
        watcher.clear()
        try watcher.publish("homeassistant/status", "online")
        // After 1-3 s, configs and states again (live now, so not retained).
        try await watcher.waitFor(timeout: 8) { !$0.retain && $0.topic == "homeassistant/light/smarthome_1_kitchen/lights/config" }
        try await watcher.waitFor(timeout: 8) { !$0.retain && $0.topic == "smarthome/1/kitchen/temperature" }
        #expect(bridge.log.contains("Home Assistant is online; republishing"))
    }

    @Test func discoveryOffClearsOwnConfigsAndThePrefixIsConfigurable() async throws {
        let broker = try await TestBroker()
        var bridge: BridgeProcess? = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_HOMEASSISTANT_PREFIX": "ha"])
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["ha/#", "homeassistant/#"])
        try await watcher.waitFor { _ in Self.configs(watcher, prefix: "ha").count >= 65 }
        #expect(Self.configs(watcher).isEmpty, "nothing under the default prefix")
        bridge?.signal(SIGTERM)
        _ = bridge?.waitForExit(timeout: 10)
        bridge = nil

        watcher.clear()
        bridge = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_HOMEASSISTANT_PREFIX": "ha",
                                                                       "SMARTHOME_HOMEASSISTANT_DISCOVERY": "false"])
        #expect(await bridge!.waitForLog("cleared stale Home Assistant configs count=65"))
        let fresh = try await TestSubscriber(broker: broker.port, subscribe: ["ha/#"])
        try await Task.sleep(for: .milliseconds(500))
        #expect(fresh.messages.filter { !$0.payload.isEmpty }.isEmpty, "no config left behind")
    }
}
