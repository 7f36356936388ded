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

    /// The demo config's 73 config topics (64 room entities, each user's every-light light and 3
    /// event entities, the bridge's connectivity sensor),
    /// for exact subscriptions: RabbitMQ gives retained messages to no wildcard filter.
    static func demoConfigTopics(prefix: String = "homeassistant") -> [String] {
        let components = ["temperature": "sensor", "humidity": "sensor", "lights": "light",
                          "movement": "binary_sensor", "gas": "binary_sensor"]
        var topics = ["\(prefix)/binary_sensor/smarthome_bridge/connectivity/config"]
        for user in ["1", "2"] {
            topics += ["\(prefix)/light/smarthome_\(user)_home/lights/config"]
                + ["gas", "alarm", "command_rejected"].map { "\(prefix)/event/smarthome_\(user)_home/\($0)/config" }
        }
        for topic in MQTTBridgeTests.retainedTopics {
            let levels = topic.split(separator: "/").map(String.init)
            guard levels.count == 4, let component = components[levels[3]] else { continue }
            topics.append("\(prefix)/\(component)/smarthome_\(levels[1])_\(levels[2])/\(levels[3])/config")
        }
        return topics.sorted()
    }

    /// Configs left by a run whose database is gone are found only by collecting the retained
    /// configs with a wildcard subscription, which RabbitMQ answers with nothing (docs/brokers.md).
    @Test(.enabled(if: TestBrokerKind.current == .mosquitto))
    func everyEntityIsAnnouncedRetainedAndStaleOnesAreCleared() async throws {
        let broker = try await TestBroker()
        let setup = try await TestSubscriber(broker: broker)
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
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["homeassistant/#"])
        try await watcher.waitFor { _ in Self.configs(watcher).count >= 74 }
        try await Task.sleep(for: .milliseconds(300))
        let found = Self.configs(watcher)
        #expect(found.count == 74, "64 room entities, 2 users' every light and events, the bridge's connectivity sensor and the foreign one")
        #expect(found[stale] == nil, "the removed room's config was cleared")
        #expect(found[foreign] != nil, "another bridge's config is left alone")
        #expect(found["homeassistant/light/smarthome_2_bedroom/lights/config"]?.contains(#""command_topic":"smarthome/2/bedroom/lights/set""#) == true)
        #expect(watcher.messages.allSatisfy { $0.retain })
    }

    @Test func everyEntityIsAnnouncedRetained() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        _ = bridge
        let wanted = Self.demoConfigTopics()
        #expect(wanted.count == 73)
        // The bridge may still be publishing when the first watcher subscribes (those come live):
        // once it has seen every config, a second watcher must get all of them as retained.
        let first = try await TestSubscriber(broker: broker, subscribe: wanted)
        try await first.waitFor { _ in Set(first.messages.map(\.topic)).count == wanted.count }
        let watcher = try await TestSubscriber(broker: broker, subscribe: wanted)
        try await watcher.waitFor { _ in Set(watcher.messages.map(\.topic)).count == wanted.count }
        #expect(watcher.messages.allSatisfy { $0.retain && !$0.payload.isEmpty })
        let light = Self.configs(watcher)["homeassistant/light/smarthome_2_bedroom/lights/config"]
        #expect(light?.contains(#""command_topic":"smarthome/2/bedroom/lights/set""#) == true)
    }

    /// A room removed from the config between two runs (same database) loses its configs; on
    /// RabbitMQ the bridge knows them only from its record of what it announced.
    @Test func aRoomRemovedBetweenRunsHasItsConfigsCleared() async throws {
        let broker = try await TestBroker()
        let storage = try TestFiles.makeDirectory("discovery").appendingPathComponent("bridge.sqlite").path
        let attic = (["temperature": "sensor", "humidity": "sensor", "lights": "light", "movement": "binary_sensor"]
            .map { "homeassistant/\($1)/smarthome_3_attic/\($0)/config" } + ["homeassistant/light/smarthome_3_home/lights/config"]
            + ["gas", "alarm", "command_rejected"].map { "homeassistant/event/smarthome_3_home/\($0)/config" })
            .sorted()
        var bridge: BridgeProcess? = try await BridgeProcess(broker: broker, extraUsers: APITests.thirdUser,
                                                             storagePath: storage)
        let first = try await TestSubscriber(broker: broker, subscribe: attic)
        try await first.waitFor { _ in Set(first.messages.filter(\.retain).map(\.topic)).count == attic.count }
        // The first run records its configs at the end of its sweep window.
        #expect(await bridge!.waitForLog("recorded the announced Home Assistant configs count=81"))
        bridge?.signal(SIGTERM)
        #expect(bridge?.waitForExit(timeout: 10) == 0)
        bridge = nil

        bridge = try await BridgeProcess(broker: broker, storagePath: storage)
        #expect(await bridge!.waitForLog("cleared stale Home Assistant configs count=\(attic.count)"))
        let fresh = try await TestSubscriber(broker: broker, subscribe: attic + Self.demoConfigTopics())
        try await fresh.waitFor { _ in Self.configs(fresh).count >= 73 }
        try await Task.sleep(for: .milliseconds(500))
        #expect(fresh.messages.filter { attic.contains($0.topic) && !$0.payload.isEmpty }.isEmpty,
                "the attic's configs are gone")
    }

    @Test func theBirthMessageGetsEverythingRepublished() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let light = "homeassistant/light/smarthome_1_kitchen/lights/config"
        let temperature = "smarthome/1/kitchen/temperature"
        // Exact topics for their retained copies (the only sign on RabbitMQ that the bridge has
        // published), a wildcard for the whole republished set.
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["homeassistant/+/+/+/config", light,
                                                                           temperature])
        try await watcher.waitFor { $0.retain && $0.topic == light }
        try await watcher.waitFor { $0.retain && $0.topic == temperature }
        try await Task.sleep(for: .milliseconds(300))
        watcher.clear()
        try watcher.publish("homeassistant/status", "online")
        // After 1-3 s, configs and states again (live now, so not retained).
        try await watcher.waitFor(timeout: 8) { !$0.retain && $0.topic == light }
        try await watcher.waitFor(timeout: 8) { !$0.retain && $0.topic == temperature }
        try await watcher.waitFor { _ in Set(Self.configs(watcher).keys).isSuperset(of: Self.demoConfigTopics()) }
        #expect(bridge.log.contains("Home Assistant is online; republishing"))
    }

    @Test func discoveryOffClearsOwnConfigsAndThePrefixIsConfigurable() async throws {
        let broker = try await TestBroker()
        // One database for both runs, as a real install has: on RabbitMQ the second run knows what
        // to clear only from it.
        let storage = try TestFiles.makeDirectory("discovery").appendingPathComponent("bridge.sqlite").path
        var bridge: BridgeProcess? = try await BridgeProcess(
            broker: broker, storagePath: storage, environment: ["SMARTHOME_HOMEASSISTANT_PREFIX": "ha"])
        let prefixed = Self.demoConfigTopics(prefix: "ha")
        let watcher = try await TestSubscriber(broker: broker, subscribe: prefixed + Self.demoConfigTopics()
                                               + ["ha/#", "homeassistant/#"])
        try await watcher.waitFor { _ in Self.configs(watcher, prefix: "ha").count >= 73 }
        #expect(await bridge!.waitForLog("recorded the announced Home Assistant configs count=73"))
        #expect(Self.configs(watcher).isEmpty, "nothing under the default prefix")
        bridge?.signal(SIGTERM)
        _ = bridge?.waitForExit(timeout: 10)
        bridge = nil

        watcher.clear()
        bridge = try await BridgeProcess(broker: broker, storagePath: storage,
                                         environment: ["SMARTHOME_HOMEASSISTANT_PREFIX": "ha",
                                                       "SMARTHOME_HOMEASSISTANT_DISCOVERY": "false"])
        #expect(await bridge!.waitForLog("cleared stale Home Assistant configs count=73"))
        let fresh = try await TestSubscriber(broker: broker, subscribe: prefixed + ["ha/#"])
        try await Task.sleep(for: .milliseconds(500))
        #expect(fresh.messages.filter { !$0.payload.isEmpty }.isEmpty, "no config left behind")
    }
}
