import Foundation
import Testing
@testable import BridgeCore

/// `/metrics` (README, "Prometheus"): every reading as a series, parsed back by a small parser of
/// the text format, and the optional token.
@Suite struct MetricsTests {
    /// One sample of Prometheus's text format 0.0.4: a name, its labels (escapes undone), a value.
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// A strict parser for what `/metrics` writes: `# HELP`/`# TYPE` comments, and samples
    /// `name{label="value",...} number`. Anything else is an error, so a malformed line fails the test.
    static func parse(_ text: String) throws -> (samples: [Sample], types: [String: String]) {
        var samples: [Sample] = []
        var types: [String: String] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if line.hasPrefix("# HELP ") { continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4, ["gauge", "counter"].contains(parts[3]) else { throw ParseError(line: String(line)) }
                types[String(parts[2])] = String(parts[3])
                continue
            }
            var rest = Substring(line)
            let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }
            guard !name.isEmpty else { throw ParseError(line: String(line)) }
            rest = rest.dropFirst(name.count)
            var labels: [String: String] = [:]
            if rest.first == "{" {
                rest = rest.dropFirst()
                while rest.first != "}" {
                    let key = rest.prefix { $0 != "=" }
                    rest = rest.dropFirst(key.count)
                    guard rest.hasPrefix("=\"") else { throw ParseError(line: String(line)) }
                    rest = rest.dropFirst(2)
                    var value = ""
                    while let character = rest.first, character != "\"" {
                        rest = rest.dropFirst()
                        if character == "\\" {
                            guard let escaped = rest.first else { throw ParseError(line: String(line)) }
                            rest = rest.dropFirst()
                            value.append(escaped == "n" ? "\n" : escaped)
                        } else {
                            value.append(character)
                        }
                    }
                    guard rest.first == "\"" else { throw ParseError(line: String(line)) }
                    rest = rest.dropFirst()
                    labels[String(key)] = value
                    if rest.first == "," { rest = rest.dropFirst() }
                }
                rest = rest.dropFirst()
            }
            guard rest.first == " ", let value = Double(rest.dropFirst()) else { throw ParseError(line: String(line)) }
            samples.append(Sample(name: String(name), labels: labels, value: value))
        }
        return (samples, types)
    }

    struct ParseError: Error { var line: String }

    let healthy = HTTPRoutes.Health(mqttConnected: true, mqttProblem: nil, broker: "b", uptimeSeconds: 1)

    func metrics(_ home: Home, token: String? = nil, header: String? = nil) -> HTTPResponse {
        var routes = HTTPRoutes(
            legacyRoutes: false,
            loginGate: LoginGate(verifyPassword: { _, _ in false }, now: { 0 }),
            sessions: SessionServices(create: { _ in "t" }, resolve: { _ in nil }, revoke: { _ in }),
            alarms: Fixtures.NoAlarms(), history: Fixtures.NoHistory(), schedule: AlarmSchedule(timeZone: .gmt, grace: 600),
            openEvents: { _ in .accepted { sink in sink.finish(with: []) } },
            switchLight: { _, _, _ in .failure(.noLights(room: "none")) })
        routes.metricsToken = token
        let request = HTTPRequest(method: "GET", path: "/metrics", headers: header.map { ["authorization": $0] } ?? [:])
        return routes.respond(to: request, home: { home }, health: { healthy })
    }

    @Test func everyReadingIsASeriesWithItsLastSeenTime() throws {
        let user = User(id: "1", username: "a", passwordHash: "x", rooms: [
            Room(id: "kitchen", name: "Kitchen", sensors: [.temperature, .lights, .gas, .humidity]),
        ])
        var home = Home(users: [user])
        let seen = Date(timeIntervalSince1970: 1_764_580_000.25)
        home.record(Reading(user: "1", room: "kitchen", sensor: .temperature, value: .number(25.68)), at: seen)
        home.record(Reading(user: "1", room: "kitchen", sensor: .lights, value: .binary(true)), at: seen)
        home.record(Reading(user: "1", room: "kitchen", sensor: .gas, value: .binary(false)), at: seen)
        // An unchanged reading still counts as seen.
        home.record(Reading(user: "1", room: "kitchen", sensor: .gas, value: .binary(false)), at: seen.addingTimeInterval(5))
        home.record(Reading(user: "1", room: "kitchen", sensor: .named("Say \"hi\""), value: .text("hello")), at: seen)
        let response = metrics(home)
        #expect(response.status == 200)
        let (samples, types) = try Self.parse(String(decoding: response.body, as: UTF8.self))
        #expect(types["smarthome_sensor_value"] == "gauge")
        #expect(types["smarthome_sensor_last_seen_seconds"] == "gauge")
        let values = samples.filter { $0.name == "smarthome_sensor_value" }
        let labels = { (sensor: String) in ["user": "1", "room": "kitchen", "sensor": sensor] }
        #expect(values == [Sample(name: "smarthome_sensor_value", labels: labels("temperature"), value: 25.7),
                           Sample(name: "smarthome_sensor_value", labels: labels("lights"), value: 1),
                           Sample(name: "smarthome_sensor_value", labels: labels("gas"), value: 0)],
                "numbers as published, binary 1/0, no series for text or a sensor never seen")
        let lastSeen = Dictionary(samples.filter { $0.name == "smarthome_sensor_last_seen_seconds" }
            .map { ($0.labels["sensor"] ?? "", $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(lastSeen["temperature"] == 1_764_580_000.25)
        #expect(lastSeen["gas"] == 1_764_580_005.25)
        #expect(lastSeen["humidity"] == nil)
        #expect(lastSeen[SensorKind.named("Say \"hi\"").id] == 1_764_580_000.25, "escaped label read back: \(lastSeen.keys)")
        #expect(samples.contains { $0.name == "smarthome_mqtt_connected" && $0.value == 1 })
    }

    @Test func aMetricsTokenIsRequiredWhenSet() {
        let home = Home(users: [])
        #expect(metrics(home).status == 200)
        #expect(metrics(home, token: "scrape-secret").status == 401)
        #expect(metrics(home, token: "scrape-secret").header("WWW-Authenticate") == "Bearer")
        #expect(metrics(home, token: "scrape-secret", header: "Bearer scrape-secreT").status == 401)
        #expect(metrics(home, token: "scrape-secret", header: "Bearer scrape-secret-longer").status == 401)
        #expect(metrics(home, token: "scrape-secret", header: "Basic scrape-secret").status == 401)
        #expect(metrics(home, token: "scrape-secret", header: "Bearer scrape-secret").status == 200)
    }

    @Test func labelValuesAreEscaped() {
        #expect(HTTPRoutes.label(#"a"b\c"# + "\nd") == #"a\"b\\c\nd"#)
    }
}
