import BridgeRuntime
import Foundation
import Testing

/// `smarthome-bridge check-config` and the other subcommands, run as a user would.
@Suite(.timeLimit(.minutes(1)))
struct CheckConfigTests {
    struct Output {
        var status: Int32
        var text: String
    }

    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Output {
        let directory = try TestFiles.makeDirectory("cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("out").path
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SMARTHOME_") }
        for (key, value) in environment { env[key] = value }
        let process = try ChildProcess.spawn(TestFiles.bridgeExecutable, arguments, environment: env, outputPath: log)
        let status = process.waitForExit(timeout: 30) ?? -1
        return Output(status: status, text: (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    static func check(_ yaml: String, environment: [String: String] = [:]) throws -> Output {
        let directory = try TestFiles.makeDirectory("config")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("bridge.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return try run(["check-config", "--config", path], environment: environment)
    }

    static let users = """
        users:
          - id: "1"
            username: Cemalettin
            password_hash: "$argon2id$v=19$m=65536,t=2,p=1$c2FsdHNhbHQ$aGFzaA"
            rooms: [Kitchen]

        """

    @Test func legacyRoutesBeyondLoopbackAreWarnedAboutLoudly() throws {
        let output = try Self.check("http:\n  bind: 0.0.0.0\n  legacy_routes: true\n\(Self.users)")
        #expect(output.status == 0)
        #expect(output.text.contains("warning: http.legacy_routes is on and http.bind 0.0.0.0 is reachable"),
                "\(output.text)")
        let quiet = try Self.check("http:\n  bind: 127.0.0.1\n  legacy_routes: true\n\(Self.users)")
        #expect(!quiet.text.contains("warning:"), "\(quiet.text)")
    }

    @Test func theDemoConfigIsValid() throws {
        let output = try Self.run(["check-config", "--config",
                                   TestFiles.repositoryRoot.appendingPathComponent("config/bridge.yaml").path])
        #expect(output.status == 0)
        #expect(output.text.contains("OK (2 users, 16 rooms)"))
    }

    @Test(arguments: [
        ("mqtt:\n  qos: 5\n", ["mqtt.qos"]),
        ("mqtt:\n  url: http://broker\n  keepalive: soon\n", ["mqtt.url", "mqtt.keepalive"]),
        ("http:\n  port: 99999\n  colour: red\n", ["http.port", "http.colour: is not a known key"]),
        ("source:\n  kind: rest\n", ["source.base_url: is required"]),
        ("bogus: 1\nlog:\n  level: chatty\n", ["bogus: is not a known key", "log.level: must be one of"]),
        ("mqtt: [1, 2]\n", ["mqtt: must be a mapping"]),
    ])
    func everyProblemNamesItsKeyPath(settings: String, expected: [String]) throws {
        let output = try Self.check(settings + Self.users)
        #expect(output.status == 1)
        for text in expected {
            #expect(output.text.contains(text), "\(text) not in:\n\(output.text)")
        }
    }

    @Test func brokenUsersAreListedOneByOne() throws {
        let output = try Self.check("""
            users:
              - id: "1"
                username: a
                password_hash: "12345"
                rooms: [Kitchen, kitchen]
              - id: "2"
                username: b
                password_hash: "$argon2id$x"
                rooms:
                  - { name: Attic, sensors: [Temperature, Pressure] }

            """)
        #expect(output.status == 1)
        #expect(output.text.contains("users[0].password_hash: must be an argon2id hash"))
        #expect(output.text.contains("users[0].rooms[1].id"))
        #expect(output.text.contains("users[1].rooms[0].sensors[1]: \"Pressure\" is not a known sensor"))
        #expect(output.text.contains("(line 10)"), "line numbers point into the file:\n\(output.text)")
    }

    @Test func syntaxErrorsAndMissingFilesAreClear() throws {
        let syntax = try Self.check("mqtt:\n  url: \"unclosed\n" + Self.users)
        #expect(syntax.status == 1)
        #expect(syntax.text.contains("line"))
        let missing = try Self.run(["check-config", "--config", "/nonexistent/bridge.yaml"])
        #expect(missing.status == 1)
        #expect(missing.text.contains("/nonexistent/bridge.yaml"))
    }

    @Test func environmentOverridesAreCheckedToo() throws {
        let output = try Self.check(Self.users, environment: ["SMARTHOME_MQTT_URL": "broker:1883"])
        #expect(output.status == 1)
        #expect(output.text.contains("mqtt.url (from SMARTHOME_MQTT_URL)"))
    }

    @Test func aBadConfigStopsTheBridgeAtStart() throws {
        let directory = try TestFiles.makeDirectory("badstart")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("bridge.yaml").path
        try ("http:\n  port: -1\n" + Self.users).write(toFile: path, atomically: true, encoding: .utf8)
        let output = try Self.run(["--config", path])
        #expect(output.status != 0)
        #expect(output.text.contains("not starting"))
        #expect(output.text.contains("http.port"))
    }

    @Test func helpVersionAndHashPassword() throws {
        let help = try Self.run(["--help"])
        #expect(help.status == 0)
        #expect(help.text.contains("check-config"))
        let version = try Self.run(["--version"])
        #expect(version.text.hasPrefix("smarthome-bridge 0.1.0"))
        let hash = try Self.run(["hash-password", "12345"])
        #expect(hash.status == 0)
        #expect(hash.text.hasPrefix("$argon2id$"))
        let unknown = try Self.run(["--frobnicate"])
        #expect(unknown.status == 2)
    }
}
