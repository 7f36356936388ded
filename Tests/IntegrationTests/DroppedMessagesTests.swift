import BridgeRuntime
import Foundation
import Testing

/// What the bridge says about messages it dropped while the broker was away (README, MQTT, and
/// docs/reliability.md, "how many were dropped"): the log, `/healthz` and `/metrics` agree.
@Suite(.timeLimit(.minutes(2)))
struct DroppedMessagesTests {
    /// The number after `key=` in a log line.
    static func figure(_ key: String, in line: String) -> Int? {
        line.split(separator: " ").first { $0.hasPrefix("\(key)=") }.flatMap { Int($0.dropFirst(key.count + 1)) }
    }

    static func health(_ port: Int) async throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: try await HTTP.get(port, "/healthz").body) as? [String: Any] ?? [:]
    }

    static func metric(_ port: Int, _ name: String) async throws -> Int? {
        let text = try await HTTP.get(port, "/metrics").text
        return text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ")[1]) }
    }

    @Test func droppedMessagesAreReportedInTheLogHealthzAndMetrics() async throws {
        let broker = try await FaultBroker()
        let maxQueued = 50
        let bridge = try await BridgeProcess(
            broker: nil, settings: Fault.settings(interval: 0.1, reconnectMin: 0.5, reconnectMax: 1),
            environment: ["SMARTHOME_MQTT_URL": broker.url, "SMARTHOME_MQTT_MAX_QUEUED": String(maxQueued)])
        #expect(try await Self.health(bridge.httpPort)["mqttDropped"] as? Int == 0)

        broker.kill()
        // 16 rooms a step, 10 steps a second: the queue of 50 is full at once.
        #expect(await bridge.waitForLog("offline queue full (mqtt.max_queued)"))
        try await Task.sleep(for: .seconds(1))
        let down = try await Self.health(bridge.httpPort)
        #expect(down["mqttQueued"] as? Int == maxQueued, "\(down)")
        #expect(try await Self.metric(bridge.httpPort, "smarthome_mqtt_queued_messages") == maxQueued)
        #expect(bridge.log.components(separatedBy: "offline queue full").count - 1 == 1, "once per outage")

        try await broker.start()
        #expect(await Fault.waitForHealth(bridge.httpPort, 200, timeout: 10) != nil)
        #expect(await bridge.waitForLog("delivering readings queued while the broker was away; some were dropped"))
        let line = bridge.log.split(separator: "\n").last { $0.contains("some were dropped") }.map(String.init) ?? ""
        let dropped = try #require(Self.figure("dropped", in: line), "\(line)")
        #expect(dropped > 0)
        #expect(Self.figure("queued", in: line) == maxQueued, "\(line)")
        #expect(Self.figure("dropped_total", in: line) == dropped, "\(line)")
        let up = try await Self.health(bridge.httpPort)
        #expect(up["mqttDropped"] as? Int == dropped, "\(up)")
        #expect(try await Self.metric(bridge.httpPort, "smarthome_mqtt_dropped_messages_total") == dropped)
        // The queue empties once the broker takes it; the count of dropped ones stays (since start).
        var queuedNow = -1
        for _ in 0..<50 {
            queuedNow = try await Self.health(bridge.httpPort)["mqttQueued"] as? Int ?? -1
            if queuedNow == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(queuedNow == 0)
        #expect(try await Self.health(bridge.httpPort)["mqttDropped"] as? Int == dropped)
    }
}
