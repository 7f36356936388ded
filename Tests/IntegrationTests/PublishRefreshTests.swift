import BridgeMQTT
import Foundation
import Testing

/// `publish.refresh` end to end (README, MQTT: "Readings are published when their payload changes,
/// and an unchanged one again after `publish.refresh`").
@Suite(.timeLimit(.minutes(2)))
struct PublishRefreshTests {
    /// User 1's gas sensors: the simulator reports them every step and they are nearly always OFF;
    /// and a light, which gets no readings at all (it changes only by command).
    static let topics = ["smarthome/1/kitchen/gas", "smarthome/1/bathroom/gas", "smarthome/1/kitchen/lights"]

    /// Per topic, the live messages that repeat the payload of the message before them on it.
    static func repeats(_ messages: [MQTTMessage]) -> [String: Int] {
        var previous: [String: String] = [:]
        var counts: [String: Int] = [:]
        for message in messages {
            if !message.retain, previous[message.topic] == message.text { counts[message.topic, default: 0] += 1 }
            previous[message.topic] = message.text
        }
        return counts
    }

    /// Watches the gas topics of a bridge with `refresh` (nil: the default, 5 minutes) for 3.5 s.
    static func repeatsSeen(refresh: String?) async throws -> [String: Int] {
        let broker = try await TestBroker()
        let publish = refresh.map { "publish:\n  refresh: \($0)\n" } ?? ""
        let bridge = try await BridgeProcess(
            broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 0.2\n  seed: 7\n" + publish)
        let watcher = try await TestSubscriber(broker: broker, subscribe: topics)
        for topic in topics { try await watcher.waitFor { $0.topic == topic && $0.retain } }
        try await Task.sleep(for: .seconds(3.5))
        _ = bridge
        return repeats(watcher.messages)
    }

    @Test func aShortRefreshRepublishesAnUnchangedValue() async throws {
        let refreshed = try await Self.repeatsSeen(refresh: "1s")
        for topic in Self.topics {
            #expect((refreshed[topic] ?? 0) >= 2, "\(topic) republished unchanged \(refreshed[topic] ?? 0) times in 3.5 s")
        }
        // The control: with the default refresh the same readings go out only when they change.
        let unrefreshed = try await Self.repeatsSeen(refresh: nil)
        #expect(unrefreshed.values.reduce(0, +) == 0, "unchanged values republished: \(unrefreshed)")
    }
}
