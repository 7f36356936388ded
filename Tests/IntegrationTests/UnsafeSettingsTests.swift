import Foundation
import Testing

/// `check-config` and the start-up warn about valid but unsafe settings, and never print a broker
/// password, wherever it was given (README "Security model").
@Suite(.timeLimit(.minutes(2)))
struct UnsafeSettingsIntegrationTests {
    static let passwords = ["hunter2-url", "filepass-0666", "devpass-url"]

    func assertNoPassword(_ text: String, _ context: String) {
        for password in Self.passwords {
            #expect(!text.contains(password), "\(password) in \(context):\n\(text)")
        }
    }

    @Test func checkConfigWarnsAboutEachUnsafeSettingAndShowsNoPassword() throws {
        let folder = try TestFiles.makeDirectory("unsafe")
        defer { try? FileManager.default.removeItem(at: folder) }
        let passwordFile = folder.appendingPathComponent("mqtt-password").path
        #expect(FileManager.default.createFile(atPath: passwordFile, contents: Data("filepass-0666\n".utf8),
                                               attributes: [.posixPermissions: 0o666]))
        let output = try CheckConfigTests.check("""
            cluster:
              secret: "\(String(repeating: "a", count: 40))"
            mqtt:
              url: mqtt://bridge@10.0.0.5:1883
              password_file: \(passwordFile)
              tls:
                verify: false
            devices:
              mqtt:
                url: "mqtt://zigbee:devpass-url@192.0.2.7"
            http:
              web_root: /

            """ + CheckConfigTests.users)
        #expect(output.status == 0, "warnings are not problems:\n\(output.text)")
        for expected in [
            "warning: cluster.secret has only 1 distinct character(s)",
            "warning: mqtt.tls.verify is false",
            "warning: mqtt.url mqtt://10.0.0.5:1883 is plain mqtt:// to a host beyond this machine",
            "warning: devices.mqtt.url mqtt://192.0.2.7:1883 is plain mqtt:// to a host beyond this machine",
            "warning: mqtt.password_file \(passwordFile) is readable by every local account (mode 666)",
            "warning: http.web_root / is the system folder /",
        ] {
            #expect(output.text.contains(expected), "\(expected) not in:\n\(output.text)")
        }
        #expect(output.text.contains("6 warning(s)"), "\(output.text)")
        assertNoPassword(output.text, "check-config")

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passwordFile)
        let safe = try CheckConfigTests.check("mqtt:\n  url: mqtts://bridge@10.0.0.5\n  password_file: \(passwordFile)\n"
            + CheckConfigTests.users)
        #expect(safe.status == 0 && !safe.text.contains("warning"), "\(safe.text)")
    }

    @Test func brokerURLsThatDoNotParseAreQuotedWithoutTheirPassword() throws {
        let inFile = try CheckConfigTests.check("mqtt:\n  url: \"mqtt://bridge:hunter2-url@broker:99999\"\n"
            + "devices:\n  mqtt:\n    url: \"tcp://zigbee:devpass-url@broker\"\n" + CheckConfigTests.users)
        #expect(inFile.status == 1)
        #expect(inFile.text.contains("mqtt.url: has an invalid port \"99999\""), "\(inFile.text)")
        #expect(inFile.text.contains("devices.mqtt.url: must start with mqtt:// or mqtts://, got \"tcp://***@broker\""),
                "\(inFile.text)")
        assertNoPassword(inFile.text, "check-config")
        let fromEnvironment = try CheckConfigTests.check(CheckConfigTests.users,
                                                         environment: ["SMARTHOME_MQTT_URL": "bridge:hunter2-url@broker"])
        #expect(fromEnvironment.text.contains("mqtt.url (from SMARTHOME_MQTT_URL): must start with mqtt:// or mqtts://, "
            + "got \"***@broker\""), "\(fromEnvironment.text)")
        assertNoPassword(fromEnvironment.text, "check-config")
        let both = try CheckConfigTests.check("mqtt:\n  url: \"mqtt://bridge:hunter2-url@broker\"\n  username: x\n"
            + CheckConfigTests.users)
        #expect(both.text.contains("mqtt.url: has a user name (user@) and mqtt.username is set too"), "\(both.text)")
        assertNoPassword(both.text, "check-config")
        // The bridge refusing to start says the same, and no more.
        let start = try CheckConfigTests.run(["--config", "/dev/null"],
                                             environment: ["SMARTHOME_MQTT_URL": "mqtt://bridge:hunter2-url@h:x"])
        #expect(start.status == 1)
        assertNoPassword(start.text, "the refused start")
    }

    /// The credentials in the URL are used (mosquitto admits any name here), and neither the log, `/healthz`
    /// nor `/metrics` show the password; the unsafe settings are logged `UNSAFE:` at start.
    @Test(.enabled(if: TestBrokerKind.current == .mosquitto))
    func theStartLogsTheUnsafeSettingsAndNoAnswerShowsThePassword() async throws {
        let broker = try await TestBroker()
        let folder = try TestFiles.makeDirectory("unsafe-start")
        defer { try? FileManager.default.removeItem(at: folder) }
        let passwordFile = folder.appendingPathComponent("mqtt-password").path
        #expect(FileManager.default.createFile(atPath: passwordFile, contents: Data("filepass-0666\n".utf8),
                                               attributes: [.posixPermissions: 0o666]))
        let bridge = try await BridgeProcess(
            broker: broker,
            settings: "cluster:\n  secret: \"\(String(repeating: "ab", count: 20))\"\n"
                + "mqtt:\n  password_file: \(passwordFile)\n  tls:\n    verify: false\nhttp:\n  web_root: /\n",
            environment: ["SMARTHOME_MQTT_URL": "mqtt://bridge@127.0.0.1:\(broker.port)"])
        for expected in ["UNSAFE: cluster.secret has only 2 distinct character(s)", "UNSAFE: mqtt.tls.verify is false",
                         "UNSAFE: mqtt.password_file \(passwordFile) is readable by every local account",
                         "UNSAFE: http.web_root / is the system folder /"] {
            #expect(bridge.log.contains(expected), "\(expected) not in:\n\(bridge.log)")
        }
        #expect(bridge.log.contains("connected to broker"), "\(bridge.log)")
        let health = try await HTTP.get(bridge.httpPort, "/healthz")
        let metrics = try await HTTP.get(bridge.httpPort, "/metrics")
        #expect(health.text.contains("mqtt://127.0.0.1:\(broker.port)"), "\(health.text)")
        assertNoPassword(bridge.log, "the log")
        assertNoPassword(health.text, "/healthz")
        assertNoPassword(metrics.text, "/metrics")
    }
}
