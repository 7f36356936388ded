import BridgeRuntime
import Foundation

/// A real mosquitto on a free loopback port, started by the test and stopped when the test ends;
/// or, with `SMARTHOME_TEST_BROKER=rabbitmq`, a fresh vhost on the process's shared RabbitMQ
/// (`TestRabbitMQ`), so the same tests run on both brokers.
final class TestBroker: @unchecked Sendable {
    private(set) var port = 0
    let directory: URL
    private var process: ChildProcess?
    private var rabbitMQ: TestRabbitMQ?
    /// Credentials for the broker (RabbitMQ only: the user name picks the test's vhost).
    private(set) var username: String?
    let password: String?
    /// mosquitto logs every PUBLISH it receives with the sender's client id (`log_type debug`), so a
    /// test can tell which client published what (`BrokerPublishLog`).
    let logsPublishes: Bool

    init(logPublishes: Bool = false) async throws {
        directory = try TestFiles.makeDirectory("broker")
        logsPublishes = logPublishes
        guard TestBrokerKind.current == .mosquitto else {
            let node = try await TestRabbitMQ.node()
            rabbitMQ = node
            port = node.mqttPort
            username = "\(try node.leaseVhost()):\(TestRabbitMQ.user)"
            password = TestRabbitMQ.password
            return
        }
        password = nil
        try await TestBroker.onFreePort { port in
            self.port = port
            try await start()
        }
    }

    /// Runs `start` with a free loopback port, trying another (up to 3) when the port was taken
    /// between finding it and the broker binding it.
    static func onFreePort(_ start: (Int) async throws -> Void) async throws {
        var lastError: Error?
        for _ in 0..<3 {
            guard let port = LoopbackPort.free() else { continue }
            do {
                try await start(port)
                return
            } catch {
                lastError = error
            }
        }
        throw lastError ?? TestFailure("no free port for mosquitto")
    }

    var url: String { "mqtt://127.0.0.1:\(port)" }

    /// mosquitto's log (its output).
    var logURL: URL { directory.appendingPathComponent("log") }

    /// What a bridge needs besides `url` to use this broker.
    var bridgeEnvironment: [String: String] {
        guard let username, let password else { return [:] }
        return ["SMARTHOME_MQTT_USERNAME": username, "SMARTHOME_MQTT_PASSWORD": password]
    }

    /// Starts (or restarts, on the same port) the broker without persistence, as a fresh one.
    /// (RabbitMQ comes back with its vhosts and whatever its retained store had written to disk.)
    func start() async throws {
        if let rabbitMQ { return try await rabbitMQ.start() }
        let config = directory.appendingPathComponent("mosquitto.conf")
        try """
            listener \(port) 127.0.0.1
            allow_anonymous true
            persistence false
            log_dest stderr
            log_type error
            log_type warning
            \(logsPublishes ? "log_type debug" : "")

            """.write(to: config, atomically: true, encoding: .utf8)
        process = try await TestBroker.launch(config: config, port: port, log: logURL)
    }

    /// Starts mosquitto with `config` and returns once it is the one listening on `port`; on
    /// failure the error quotes its log.
    static func launch(config: URL, port: Int, log: URL) async throws -> ChildProcess {
        let process = try ChildProcess.spawn(TestFiles.mosquitto, ["-c", config.path], outputPath: log.path)
        let accepting = await LoopbackPort.waitUntilAccepting(port: port, timeout: 10)
        // A mosquitto that could not bind exits at once; still running now means it is the listener.
        try await Task.sleep(for: .milliseconds(100))
        guard accepting, process.isRunning else {
            process.terminate()
            let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw TestFailure("mosquitto did not start on port \(port):\n\(output)")
        }
        return process
    }

    /// Kills the broker at once (no clean shutdown), as a crash would.
    func kill() {
        rabbitMQ?.kill()
        process?.signal(SIGKILL)
        _ = process?.waitForExit(timeout: 5)
        process = nil
    }

    func stop() {
        process?.terminate()
        process = nil
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Polls `condition` every 50 ms until it holds or `timeout` seconds pass; returns whether it held.
func eventually(timeout: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return condition()
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Paths the tests need.
enum TestFiles {
    /// The bridge executable, built beside the test bundle.
    static var bridgeExecutable: String {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = testBinary.deletingLastPathComponent()
        // The test binary may sit inside a bundle folder (`*.xctest/...`); walk up to the build folder.
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("smarthome-bridge").path),
              directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("smarthome-bridge").path
    }

    static var mosquitto: String {
        ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto"]
            .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "mosquitto"
    }

    /// The repository's root (for the demo config).
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func makeDirectory(_ name: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("smarthome-tests-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        return directory
    }
}
