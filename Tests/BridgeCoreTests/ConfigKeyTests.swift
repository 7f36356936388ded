import Foundation
import Testing
@testable import BridgeCore

/// Every key README documents is accepted, decoded into `BridgeConfiguration` and checked, from the file
/// and from its environment variable alike.
@Suite struct ConfigKeyTests {
    /// A key's test values: one valid and not the default, the keys it needs beside it (the baseline it is
    /// compared with), and one bad value (`nil`: any text is valid, so only a list in the file is wrong).
    struct Sample {
        var good: String
        var needs: [String: String] = [:]
        var bad: String?
    }

    static let secret = String(repeating: "k", count: 32)

    static let samples: [String: Sample] = [
        "mqtt.url": Sample(good: "mqtt://broker:1884", bad: "http://broker"),
        "mqtt.embedded_port": Sample(good: "1999", bad: "70000"),
        "mqtt.base_topic": Sample(good: "home", bad: "home/#"),
        "mqtt.client_id": Sample(good: "bridge-1", bad: ""),
        "mqtt.username": Sample(good: "bridge", bad: ""),
        "mqtt.password": Sample(good: "pw", needs: ["mqtt.username": "bridge"], bad: nil),
        "mqtt.password_file": Sample(good: "/run/secrets/mqtt", needs: ["mqtt.username": "bridge"], bad: ""),
        "mqtt.qos": Sample(good: "0", bad: "3"),
        "mqtt.keepalive": Sample(good: "45s", bad: "1.5"),
        "mqtt.reconnect_min": Sample(good: "2s", bad: "0"),
        "mqtt.reconnect_max": Sample(good: "2m", bad: "soon"),
        "mqtt.max_queued": Sample(good: "50", bad: "many"),
        "mqtt.tls.ca": Sample(good: "/etc/ca.pem", bad: ""),
        // Either needs the other, so each is compared with the pair holding another file.
        "mqtt.tls.cert": Sample(good: "/etc/cert.pem", needs: ["mqtt.tls.key": "/etc/key.pem", "mqtt.tls.cert": "/etc/old.pem"],
                                bad: ""),
        "mqtt.tls.key": Sample(good: "/etc/key.pem", needs: ["mqtt.tls.cert": "/etc/cert.pem", "mqtt.tls.key": "/etc/old.pem"],
                               bad: ""),
        "mqtt.tls.verify": Sample(good: "false", bad: "maybe"),
        "http.bind": Sample(good: "0.0.0.0", bad: ""),
        "http.port": Sample(good: "9090", bad: "70000"),
        "http.legacy_routes": Sample(good: "true", bad: "maybe"),
        "http.max_connections": Sample(good: "10", bad: "0"),
        "http.max_connections_per_address": Sample(good: "5", bad: "0"),
        "http.connection_timeout": Sample(good: "1m", bad: "0"),
        "http.max_header_bytes": Sample(good: "4096", bad: "10"),
        "http.max_body_bytes": Sample(good: "100", bad: "-1"),
        "http.threads": Sample(good: "2", bad: "0"),
        "http.session_ttl": Sample(good: "7d", bad: "0"),
        "http.web_root": Sample(good: "/srv/web", bad: ""),
        "http.request_head_timeout": Sample(good: "20s", bad: "0"),
        "http.max_streams_per_token": Sample(good: "4", bad: "0"),
        "http.max_streams_per_user": Sample(good: "6", bad: "0"),
        "http.tls.cert": Sample(good: "/etc/cert.pem", needs: ["http.tls.key": "/etc/key.pem", "http.tls.cert": "/etc/old.pem"],
                                bad: ""),
        "http.tls.key": Sample(good: "/etc/key.pem", needs: ["http.tls.cert": "/etc/cert.pem", "http.tls.key": "/etc/old.pem"],
                               bad: ""),
        "http.allowed_hosts": Sample(good: "bridge.lan,127.0.0.1", bad: ""),
        "http.trusted_proxies": Sample(good: "127.0.0.1", bad: ""),
        "http.metrics_token": Sample(good: "scrape-token", bad: ""),
        "source.kind": Sample(good: "rest", needs: ["source.base_url": "http://127.0.0.1:8081"], bad: "magic"),
        "source.interval": Sample(good: "500ms", bad: "-1"),
        "source.seed": Sample(good: "9", bad: "-1"),
        "source.base_url": Sample(good: "http://127.0.0.1:8081", bad: "ftp://127.0.0.1"),
        "source.timeout": Sample(good: "2s", bad: "0"),
        "source.concurrency": Sample(good: "4", bad: "0"),
        "source.failures_before_offline": Sample(good: "2", bad: "0"),
        "source.max_backoff": Sample(good: "1h", bad: "0"),
        "source.lights_command.method": Sample(good: "put", bad: "DELETE"),
        "source.lights_command.path": Sample(good: "/lights/{userID}/{room}", bad: ""),
        "source.lights_command.body": Sample(good: "{\"state\":\"{state}\"}", bad: nil),
        "publish.refresh": Sample(good: "10m", bad: "0"),
        "storage.path": Sample(good: "/tmp/x.sqlite", bad: ""),
        "storage.url": Sample(good: "postgres://bridge:pw@db:5432/homes", bad: "mysql://db/homes"),
        "storage.retention_days": Sample(good: "7", bad: "0"),
        "homeassistant.discovery": Sample(good: "false", bad: "maybe"),
        "homeassistant.prefix": Sample(good: "ha", bad: "ha/#"),
        "homie.enabled": Sample(good: "true", bad: "maybe"),
        "homie.prefix": Sample(good: "devices", bad: "Homie/x"),
        "scheduler.timezone": Sample(good: "Europe/Istanbul", bad: "Mars/Olympus_Mons"),
        "scheduler.grace": Sample(good: "15m", bad: "2d"),
        // Either needs the other, so each is compared with the pair holding another place.
        "scheduler.latitude": Sample(good: "41.01", needs: ["scheduler.longitude": "28.97", "scheduler.latitude": "10"],
                                     bad: "91"),
        "scheduler.longitude": Sample(good: "-28.97", needs: ["scheduler.latitude": "41.01", "scheduler.longitude": "10"],
                                      bad: "east"),
        "watchdogs.max_per_user": Sample(good: "3", bad: "-1"),
        "alarms.max_per_user": Sample(good: "3", bad: "-1"),
        "commands.rate": Sample(good: "0.5", bad: "0"),
        "commands.burst": Sample(good: "5", bad: "0"),
        "notify.attempts": Sample(good: "2", bad: "0"),
        "notify.backoff": Sample(good: "500ms", bad: "0"),
        "notify.max_backoff": Sample(good: "5m", bad: "soon"),
        "notify.timeout": Sample(good: "2s", bad: "0"),
        "notify.max_queued": Sample(good: "10", bad: "0"),
        "notify.concurrency": Sample(good: "2", bad: "0"),
        "log.level": Sample(good: "debug", bad: "loud"),
        "cluster.instances": Sample(good: "3", needs: ["cluster.secret": secret], bad: "0"),
        "cluster.index": Sample(good: "2", needs: ["cluster.instances": "3", "cluster.secret": secret], bad: "5000"),
        "cluster.secret": Sample(good: secret, bad: "too-short"),
        "cluster.command_timeout": Sample(good: "2s", bad: "0"),
        "cluster.mirror_idle": Sample(good: "2m", bad: "soon"),
        "cluster.lease": Sample(good: "3s", bad: "0s"),
        "devices.mqtt.url": Sample(good: "mqtt://devices:1883", bad: "http://devices"),
        "devices.mqtt.username": Sample(good: "bridge", bad: ""),
        "devices.mqtt.password": Sample(good: "pw", bad: ""),
        "devices.zigbee2mqtt.base_topic": Sample(good: "z2m", bad: "z2m/#"),
        "devices.command_timeout": Sample(good: "2s", bad: "0"),
    ]

    /// The keys of README's "Configuration" table; `.path` after `source.lights_command.method` is
    /// `source.lights_command.path`.
    static func documentedKeys() throws -> [String] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "\n## Configuration\n").last?
            .components(separatedBy: "\n## ").first)
        var keys: [String] = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            var parent = ""
            for name in cell.split(separator: "`").enumerated().filter({ $0.offset % 2 == 0 }).map(\.element)
            where !name.allSatisfy({ $0 == "," || $0 == " " }) {
                let path = name.hasPrefix(".") ? parent + name : String(name)
                parent = path.split(separator: ".").dropLast().joined(separator: ".")
                keys.append(path)
            }
        }
        return keys
    }

    static func document(_ flat: [String: String]) -> ConfigNode {
        func build(_ entries: [(path: [Substring], value: String)]) -> ConfigNode {
            var order: [Substring] = []
            var groups: [Substring: [(path: [Substring], value: String)]] = [:]
            for entry in entries {
                if groups[entry.path[0]] == nil { order.append(entry.path[0]) }
                groups[entry.path[0], default: []].append((Array(entry.path.dropFirst()), entry.value))
            }
            return .mapping(order.map { name in
                let members = groups[name]!
                if members.count == 1, members[0].path.isEmpty {
                    return (String(name), .scalar(members[0].value, isQuoted: false, line: 1))
                }
                return (String(name), build(members))
            }, line: 1)
        }
        guard case .mapping(var members, let line) = build(flat.sorted { $0.key < $1.key }.map {
            ($0.key.split(separator: "."), $0.value)
        }) else { return .null(line: 0) }
        members.append(("users", Fixtures.node(Fixtures.minimalUsers)))
        return .mapping(members, line: line)
    }

    /// Every stored field of the configuration as text, so two configurations compare field by field.
    static func fields(_ configuration: BridgeConfiguration) -> String {
        var text = ""
        dump(configuration, to: &text)
        return text
    }

    static func load(_ flat: [String: String], environment: [String: String] = [:])
        -> Result<BridgeConfiguration, ConfigIssues>
    {
        ConfigLoader.load(document(flat), environment: environment)
    }

    @Test func readmeDocumentsExactlyTheDecodedKeys() throws {
        let documented = try Self.documentedKeys()
        #expect(documented.count == Set(documented).count, "documented twice: \(documented)")
        #expect(Set(documented) == Set(ConfigLoader.scalarKeys),
                """
                README only: \(Set(documented).subtracting(ConfigLoader.scalarKeys)), \
                decoded only: \(Set(ConfigLoader.scalarKeys).subtracting(documented))
                """)
        #expect(Set(Self.samples.keys) == Set(ConfigLoader.scalarKeys))
        #expect(ConfigLoader.scalarKeys.count == Set(ConfigLoader.scalarKeys).count)
    }

    @Test func everyKeyChangesTheConfigurationFromTheFileAndFromTheEnvironment() throws {
        for key in ConfigKey.all {
            let sample = try #require(Self.samples[key.path], "no sample for \(key.path)")
            let baseline = Self.fields(try Self.load(sample.needs).get())
            var withKey = sample.needs
            withKey[key.path] = sample.good
            let fromFile = try Self.load(withKey).get()
            let changed = Self.fields(fromFile) != baseline
            #expect(changed, "\(key.path): \(sample.good) changed nothing")
            let fromEnvironment = try Self.load(sample.needs, environment: [key.environmentName: sample.good]).get()
            let same = Self.fields(fromEnvironment) == Self.fields(fromFile)
            #expect(same,
                    "\(key.environmentName)=\(sample.good) differs from \(key.path): \(sample.good) in the file")
        }
    }

    @Test func everyKeyRefusesABadValueNamingItsPath() throws {
        var anyTextIsValid: [String] = []
        for key in ConfigKey.all {
            let sample = try #require(Self.samples[key.path])
            var document = Self.document(sample.needs)
            if case .mapping(var members, let line) = document {
                let path = key.path.split(separator: ".").map(String.init)
                let bad: ConfigNode = sample.bad.map { .scalar($0, isQuoted: true, line: 7) }
                    ?? .sequence([.scalar("a", isQuoted: false, line: 7)], line: 7)
                members = Self.setting(members, path[...], to: bad)
                document = .mapping(members, line: line)
            }
            guard case .failure(let fromFile) = ConfigLoader.load(document, environment: [:]) else {
                Issue.record("\(key.path): \(sample.bad ?? "[a]") was accepted")
                continue
            }
            #expect(fromFile.issues.contains { $0.path == key.path && $0.line == 7 },
                    "\(key.path) not among \(fromFile.issues.map(\.description))")
            guard let bad = sample.bad else {
                anyTextIsValid.append(key.path)
                continue
            }
            guard case .failure(let fromEnvironment) = Self.load(sample.needs, environment: [key.environmentName: bad])
            else {
                Issue.record("\(key.environmentName)=\(bad) was accepted")
                continue
            }
            #expect(fromEnvironment.issues.contains { $0.path == "\(key.path) (from \(key.environmentName))" },
                    "\(key.environmentName) not among \(fromEnvironment.issues.map(\.description))")
        }
        #expect(anyTextIsValid == ["mqtt.password", "source.lights_command.body"])
    }

    /// `members` with the value at `path` replaced or added.
    static func setting(_ members: [(key: String, value: ConfigNode)], _ path: ArraySlice<String>,
                        to value: ConfigNode) -> [(key: String, value: ConfigNode)] {
        var members = members
        let name = path.first!
        let index = members.firstIndex { $0.key == name }
        let replacement: ConfigNode
        if path.count == 1 {
            replacement = value
        } else {
            var inner: [(key: String, value: ConfigNode)] = []
            if let index, case .mapping(let existing, _) = members[index].value { inner = existing }
            replacement = .mapping(setting(inner, path.dropFirst(), to: value), line: 1)
        }
        if let index { members[index].value = replacement } else { members.insert((name, replacement), at: 0) }
        return members
    }

    @Test func environmentNamesFollowThePath() {
        #expect(ConfigKey.all.map(\.environmentName).contains("SMARTHOME_CLUSTER_MIRROR_IDLE"))
        #expect(ConfigKey.environmentName(of: "source.lights_command.method") == "SMARTHOME_SOURCE_LIGHTS_COMMAND_METHOD")
    }
}
