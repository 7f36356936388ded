import BridgeCrypto
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

    static func run(_ arguments: [String], environment: [String: String] = [:],
                    executable: String = TestFiles.bridgeExecutable) throws -> Output {
        let directory = try TestFiles.makeDirectory("cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("out").path
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SMARTHOME_") }
        for (key, value) in environment { env[key] = value }
        let process = try ChildProcess.spawn(executable, arguments, environment: env, outputPath: log)
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

    /// A problem of one user must not hide another user's: all of them come in one run.
    @Test func oneRunListsEveryProblem() throws {
        let output = try Self.check("""
            mqtt:
              qos: 9
            users:
              - id: "1"
                username: a
                password_hash: "$argon2id$x"
                rooms:
                  - { name: Attic, sensors: [Temperature, Pressure, Wind] }
                  - Attic
              - id: "1"
                username: b
                password_hash: "$argon2id$x"
                rooms: [Kitchen]

            """)
        #expect(output.status == 1)
        for expected in [
            "mqtt.qos: must be", "users[0].rooms[0].sensors[1]: \"Pressure\" is not a known sensor",
            "users[0].rooms[0].sensors[2]: \"Wind\"", "users[0].rooms[1].id: \"attic\" is used by another room",
            "users[1].id: \"1\" is used by another user", "5 problem(s)",
        ] {
            #expect(output.text.contains(expected), "\(expected) not in:\n\(output.text)")
        }
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

    @Test func unknownEnvironmentVariablesAreWarnedAbout() throws {
        let output = try Self.check(Self.users, environment: ["SMARTHOME_MQTT_BASETOPIC": "home",
                                                              "SMARTHOME_WEATHER": "sunny"])
        #expect(output.status == 0, "a warning is not a problem:\n\(output.text)")
        #expect(output.text.contains("OK (1 users, 1 rooms), 2 warning(s)"), "\(output.text)")
        #expect(output.text.contains("warning: SMARTHOME_MQTT_BASETOPIC: is not a known variable and is ignored; "
            + "did you mean SMARTHOME_MQTT_BASE_TOPIC (mqtt.base_topic)?"), "\(output.text)")
        #expect(output.text.contains("warning: SMARTHOME_WEATHER: is not a known variable and is ignored\n"))
        let quiet = try Self.check(Self.users, environment: ["SMARTHOME_MQTT_BASE_TOPIC": "home"])
        #expect(!quiet.text.contains("warning"), "\(quiet.text)")
    }

    @Test func unknownEnvironmentVariablesAreWarnedAboutAtStart() async throws {
        let bridge = try await BridgeProcess(broker: nil, environment: ["SMARTHOME_HTTP_PROT": "9999"])
        #expect(bridge.log.contains("WARNING SMARTHOME_HTTP_PROT is not a known variable and is ignored; "
            + "did you mean SMARTHOME_HTTP_PORT (http.port)?"), "\(bridge.log)")
    }

    @Test func aBadConfigStopsTheBridgeAtStart() throws {
        let directory = try TestFiles.makeDirectory("badstart")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("bridge.yaml").path
        try ("http:\n  port: -1\n" + Self.users).write(toFile: path, atomically: true, encoding: .utf8)
        for arguments in [["--config", path], ["run", "--config", path], ["--config", path, "run"]] {
            let output = try Self.run(arguments)
            #expect(output.status == 1, "\(arguments): \(output.text)")
            #expect(output.text.contains("not starting"))
            #expect(output.text.contains("http.port"))
        }
    }

    @Test func hashPasswordReadsOneLineFromAPipe() throws {
        let piped = try Self.run(["-c", #"printf 'pipe secret\nsecond line\n' | "$0" hash-password"#,
                                  TestFiles.bridgeExecutable], executable: "/bin/sh")
        #expect(piped.status == 0, "\(piped.text)")
        let lines = piped.text.split(separator: "\n")
        #expect(lines.count == 1, "only the hash, no prompt: \(piped.text)")
        #expect(PasswordHasher.verify(password: "pipe secret", hash: String(lines.first ?? "")))
        let empty = try Self.run(["-c", #""$0" hash-password < /dev/null"#, TestFiles.bridgeExecutable],
                                 executable: "/bin/sh")
        #expect(empty.status == 2)
        #expect(empty.text.contains("no password given"), "\(empty.text)")
    }

    /// Types at a real pseudo-terminal (python3's `pty`): a prompt on it, nothing echoed, asked twice.
    @Test(arguments: [("pty secret", "pty secret"), ("pty secret", "pty secrte")])
    func hashPasswordAtATerminalPromptsWithoutEcho(first: String, second: String) throws {
        let script = #"""
            import os, pty, select, sys
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], [sys.argv[1], "hash-password"])
            out = b""
            def read(until=None):
                global out
                while until is None or until not in out:
                    ready, _, _ = select.select([fd], [], [], 30)
                    if not ready:
                        sys.exit("nothing more from the terminal; so far: %r" % out)
                    try:
                        chunk = os.read(fd, 1024)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        if until is None:
                            return
                        sys.exit("terminal closed before %r; got %r" % (until, out))
                    out += chunk
            read(b"Password: ")
            os.write(fd, sys.argv[2].encode() + b"\n")
            read(b"Again: ")
            os.write(fd, sys.argv[3].encode() + b"\n")
            read()
            _, status = os.waitpid(pid, 0)
            sys.stdout.write(out.decode())
            sys.stdout.write("\nexit %d\n" % os.waitstatus_to_exitcode(status))
            """#
        let output = try Self.run(["-c", script, TestFiles.bridgeExecutable, first, second], executable: "/usr/bin/python3")
        #expect(output.status == 0, "\(output.text)")
        #expect(output.text.contains("Password: ") && output.text.contains("Again: "), "\(output.text)")
        #expect(!output.text.contains("pty secr"), "the password was echoed:\n\(output.text)")
        if first == second {
            #expect(output.text.contains("exit 0"), "\(output.text)")
            let hash = output.text.split(whereSeparator: \.isNewline).first { $0.hasPrefix("$argon2id$") }
            #expect(PasswordHasher.verify(password: first, hash: String(hash ?? "")), "\(output.text)")
        } else {
            #expect(output.text.contains("the two passwords differ"), "\(output.text)")
            #expect(output.text.contains("exit 2"), "\(output.text)")
            #expect(!output.text.contains("$argon2id$"))
        }
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
        #expect(unknown.text.contains("unknown option --frobnicate"))
        for usage in [["frobnicate"], ["--config"], ["check-config", "extra"], ["hash-password", "a", "b"]] {
            #expect(try Self.run(usage).status == 2, "\(usage)")
        }
        #expect(try Self.run(["hash-password", ""]).status == 2, "an empty password")
        #expect(help.text.contains("Exit status: 0"))
    }
}
