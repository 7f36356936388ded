import Foundation
import Testing

/// Where mosquitto and RabbitMQ's MQTT plugin differ (docs/brokers.md), checked on the broker the
/// suite runs on: each test expects that broker's own behaviour, so a change in either shows up.
/// A client's own publish after its subscribe is the marker that the broker has handled the
/// subscription (a broker handles one connection's packets in order), so nothing waits for a
/// message that should not come.
@Suite(.timeLimit(.minutes(2)))
struct BrokerDifferencesTests {
    static let onRabbitMQ = TestBrokerKind.current == .rabbitmq

    /// Subscribes `filters`, publishes a marker on `marker` and returns what came up to and with it.
    static func receivedUntilMarker(_ broker: TestBroker, _ filters: [String], marker: String) async throws
        -> [MQTTMessageSummary] {
        let reader = try await TestSubscriber(broker: broker, subscribe: filters + [marker])
        try reader.publish(marker, "marker")
        try await reader.waitFor(marker, payload: "marker")
        return reader.messages.map { MQTTMessageSummary(topic: $0.topic, text: $0.text, retain: $0.retain) }
    }

    @Test func retainedMessagesReachExactFiltersAndOnlyOnMosquittoWildcards() async throws {
        let broker = try await TestBroker()
        let setup = try await TestSubscriber(broker: broker)
        try setup.publish("diff/room/temperature", "25.5", retain: true)
        #expect(await setup.client.waitForPublished(timeout: 5))

        let exact = try await Self.receivedUntilMarker(broker, ["diff/room/temperature"], marker: "diff/marker/1")
        #expect(exact.contains { $0.topic == "diff/room/temperature" && $0.text == "25.5" && $0.retain })
        for filter in ["diff/#", "diff/+/temperature"] {
            let wildcard = try await Self.receivedUntilMarker(broker, [filter], marker: "diff/marker/2")
            let got = wildcard.contains { $0.topic == "diff/room/temperature" && $0.retain }
            #expect(got == !Self.onRabbitMQ, "\(filter): retained message delivered: \(got)")
        }
    }

    @Test func anEmptyRetainedPublishDeletesTheRetainedMessage() async throws {
        let broker = try await TestBroker()
        let setup = try await TestSubscriber(broker: broker)
        try setup.publish("diff/old/config", "{}", retain: true)
        try setup.publish("diff/old/config", "", retain: true)
        #expect(await setup.client.waitForPublished(timeout: 5))
        let seen = try await Self.receivedUntilMarker(broker, ["diff/old/config"], marker: "diff/marker/3")
        #expect(!seen.contains { $0.topic == "diff/old/config" }, "\(seen)")
    }

    @Test func dotsInTopicsComeBackAsLevelsOnRabbitMQ() async throws {
        let broker = try await TestBroker()
        let reader = try await TestSubscriber(broker: broker, subscribe: ["diff/#"])
        try reader.publish("diff/v1.2/firmware", "dotted")
        let message = try await reader.waitFor { $0.text == "dotted" }
        #expect(message.topic == (Self.onRabbitMQ ? "diff/v1/2/firmware" : "diff/v1.2/firmware"))
    }

    /// The bridge warns about a base topic with a dot, which it cannot use on RabbitMQ: its
    /// retained state is seen there under other topics.
    @Test func aDottedBaseTopicIsWarnedAboutAndRewrittenByRabbitMQ() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_MQTT_BASE_TOPIC": "home.test"])
        #expect(bridge.log.contains("mqtt.base_topic contains '.' or '*'"))
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["home.test/bridge/state"])
        let state = try await watcher.waitFor { $0.text == "online" && $0.retain }
        #expect(state.topic == (Self.onRabbitMQ ? "home/test/bridge/state" : "home.test/bridge/state"))
        // A command reaches the bridge under the rewritten topic too, which is not under its base.
        try watcher.publish("home.test/1/kitchen/lights/set", "ON")
        if Self.onRabbitMQ {
            #expect(await bridge.waitForLog("ignored message on an unexpected topic"))
            #expect(bridge.log.contains("home/test/1/kitchen/lights/set"))
        } else {
            let switched = try await TestSubscriber(broker: broker, subscribe: ["home.test/1/kitchen/lights"])
            try await switched.waitFor("home.test/1/kitchen/lights", payload: "ON")
        }
    }
}

/// What a test keeps of a received message.
struct MQTTMessageSummary: CustomStringConvertible {
    var topic: String
    var text: String
    var retain: Bool

    var description: String { "\(topic)=\(text)\(retain ? " (retained)" : "")" }
}
