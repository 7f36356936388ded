import Foundation
import Testing

/// While the broker is connected the bridge's queue is only a backlog: a burst larger than
/// `mqtt.max_queued` (the bound for outages) must reach the broker whole.
@Suite(.timeLimit(.minutes(2)))
struct BackPressureTests {
    @Test func aBurstBeyondMaxQueuedIsNotDroppedWhileConnected() async throws {
        let broker = try await TestBroker()
        // The retained state with Home Assistant discovery is about 150 messages at once, far past
        // libmosquitto's 100 in flight plus a queue of 5.
        let settings = "http:\n  legacy_routes: true\nsource:\n  interval: 0.2\n  seed: 7\nmqtt:\n  max_queued: 5\n"
        let bridge = try await BridgeProcess(broker: broker, settings: settings)
        // Throws unless every retained topic arrived.
        let values = try await MQTTBridgeTests.collectRetained(port: broker.port)
        #expect(values["smarthome/bridge/state"] == "online")
        let discovery = try await TestSubscriber(broker: broker.port, subscribe: ["homeassistant/+/+/+/config"])
        // The connectivity sensor, 64 room entities, and per user an every-light light and 3 event entities.
        let allConfigs = await eventually(timeout: 5) { Set(discovery.messages.map(\.topic)).count == 1 + 16 * 4 + 2 * 4 }
        #expect(allConfigs, "configs seen: \(Set(discovery.messages.map(\.topic)).count)")
        let health = try await HTTP.get(bridge.httpPort, "/healthz")
        let fields = try JSONSerialization.jsonObject(with: health.body) as? [String: Any] ?? [:]
        #expect(fields["mqttDropped"] as? Int == 0, "\(health.text)")
        #expect(!bridge.log.contains("offline queue full"), "\(bridge.log)")
    }
}
