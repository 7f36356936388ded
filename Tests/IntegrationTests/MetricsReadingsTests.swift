import Foundation
import Testing

/// `/metrics` over a real socket (README, "Prometheus"): every demo sensor's value equals its
/// retained MQTT value, with a last-seen time; the token when `http.metrics_token` is set.
@Suite(.timeLimit(.minutes(2)))
struct MetricsReadingsTests {
    /// `name{user="…",room="…",sensor="…"} value` lines of one metric, by `user/room/sensor`.
    static func series(_ text: String, _ name: String) -> [String: String] {
        var found: [String: String] = [:]
        let pattern = /^([a-z_]+)\{user="([^"]*)",room="([^"]*)",sensor="([^"]*)"\} (\S+)$/
        for line in text.split(separator: "\n") {
            guard let match = line.wholeMatch(of: pattern), match.1 == name else { continue }
            found["\(match.2)/\(match.3)/\(match.4)"] = String(match.5)
        }
        return found
    }

    @Test func everySensorsValueIsItsRetainedMQTTValue() async throws {
        let broker = try await TestBroker()
        let started = Date().timeIntervalSince1970
        // One reading per hour: the values stay those of the start while they are compared.
        let bridge = try await BridgeProcess(broker: broker, settings: "source:\n  interval: 1h\n  seed: 7\n",
                                             environment: ["SMARTHOME_HTTP_METRICS_TOKEN": "scrape-secret"])
        let retained = try await MQTTBridgeTests.collectRetained(broker: broker)
        let reply = try await HTTP.send(bridge.httpPort, "/metrics", method: "GET", token: "scrape-secret")
        #expect(reply.status == 200)
        let values = Self.series(reply.text, "smarthome_sensor_value")
        let seen = Self.series(reply.text, "smarthome_sensor_last_seen_seconds")
        let sensorTopics = MQTTBridgeTests.retainedTopics.filter {
            $0.split(separator: "/").count == 4 && !$0.hasSuffix("/availability")
        }
        #expect(sensorTopics.count == 64)
        #expect(values.count == 64, "one value per demo sensor")
        for topic in sensorTopics.sorted() {
            let key = String(topic.dropFirst("smarthome/".count))
            let mqtt = try #require(retained[topic], "\(topic) not retained")
            let want: Double? = switch mqtt {
            case "ON": 1
            case "OFF": 0
            default: Double(mqtt)
            }
            #expect(values[key].flatMap(Double.init) == want, "\(key): /metrics \(values[key] ?? "-"), MQTT \(mqtt)")
            let time = try #require(seen[key].flatMap(Double.init), "\(key) has no last-seen time")
            #expect(time >= started - 5 && time <= Date().timeIntervalSince1970 + 5, "\(key) last seen \(time)")
        }

        let missing = try await HTTP.send(bridge.httpPort, "/metrics", method: "GET")
        #expect(missing.status == 401)
        #expect(missing.headers["www-authenticate"] == "Bearer")
        let wrong = try await HTTP.send(bridge.httpPort, "/metrics", method: "GET", token: "scrape-secreT")
        #expect(wrong.status == 401)
        #expect(!wrong.text.contains("smarthome_sensor_value"))
    }
}
