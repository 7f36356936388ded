import BridgeRuntime
import Foundation

/// The real `smarthome-bridge` executable, started with a config the test writes.
final class BridgeProcess: @unchecked Sendable {
    let httpPort: Int
    let directory: URL
    let logPath: String
    private let process: ChildProcess

    /// Starts the bridge with the demo users and rooms.
    /// - Parameters:
    ///   - broker: the test broker, or `nil` to let the bridge start its embedded one.
    ///   - settings: extra YAML put before the users (e.g. `source:\n  interval: 0.2\n`).
    ///   - environment: extra `SMARTHOME_*` variables.
    ///   - extraUsers: YAML list items appended to the demo users.
    ///   - storagePath: the database file, to share one between bridges started one after another.
    init(
        broker: TestBroker?, settings: String = "", extraUsers: String = "", storagePath: String? = nil,
        environment: [String: String] = [:]
    ) async throws {
        directory = try TestFiles.makeDirectory("bridge")
        var env = environment
        if let broker {
            env["SMARTHOME_MQTT_URL"] = env["SMARTHOME_MQTT_URL"] ?? broker.url
            env.merge(broker.bridgeEnvironment) { mine, _ in mine }
        }
        let started = try await Self.launch(config: Self.demoConfig(settings: settings) + extraUsers, in: directory,
                                            storagePath: storagePath, environment: env)
        httpPort = started.httpPort
        logPath = started.logPath
        process = started.process
        // Ready when its retained state is on the broker, so a subscriber that comes later gets it
        // as retained messages.
        guard await waitForRetainedPublish(count: 1) else {
            process.terminate()
            throw TestFailure("bridge did not publish its state; log:\n\(log)")
        }
    }

    /// Writes `config` into `directory` and starts the bridge on a free HTTP port, its database in
    /// `directory` unless `storagePath` says otherwise; returns once the bridge listens on that
    /// port, and tries another (as `TestBroker.onFreePort` does) when the port was taken between
    /// finding it and the bridge binding it (the bridge then exits).
    static func launch(config: String, in directory: URL, storagePath: String? = nil,
                       environment: [String: String]) async throws
        -> (httpPort: Int, logPath: String, process: ChildProcess)
    {
        let configFile = directory.appendingPathComponent("bridge.yaml")
        try config.write(to: configFile, atomically: true, encoding: .utf8)
        let logPath = directory.appendingPathComponent("bridge.log").path
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SMARTHOME_") }
        env["SMARTHOME_MQTT_EMBEDDED_PORT"] = "0"  // tests run side by side: never the shared 1883
        env["SMARTHOME_STORAGE_PATH"] = storagePath ?? directory.appendingPathComponent("bridge.sqlite").path
        for (key, value) in environment { env[key] = value }
        var started: (httpPort: Int, logPath: String, process: ChildProcess)?
        try await TestBroker.onFreePort { port in
            try? FileManager.default.removeItem(atPath: logPath)  // a failed attempt's lines
            env["SMARTHOME_HTTP_PORT"] = String(port)
            let process = try ChildProcess.spawn(TestFiles.bridgeExecutable, ["--config", configFile.path],
                                                 environment: env, outputPath: logPath)
            func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
            // Logged once the HTTP server has bound the port; a bridge that cannot bind exits.
            let listening = await eventually(timeout: 15) { log().contains("HTTP listening") || !process.isRunning }
            guard listening, log().contains("HTTP listening") else {
                process.terminate()
                throw TestFailure("the bridge did not listen on HTTP port \(port); log:\n\(log())")
            }
            started = (port, logPath, process)
        }
        guard let started else { throw TestFailure("the bridge did not start") }
        return started
    }

    /// Waits until the bridge has published its whole retained state `count` times (once per
    /// connection to a broker).
    func waitForRetainedPublish(count: Int, timeout: Double = 15) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if log.components(separatedBy: "published retained state").count - 1 >= count { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// The demo config's users and rooms (the hashes are of the demo passwords 12345 and 123456),
    /// with legacy routes on and a quick simulation.
    static func demoConfig(settings: String) throws -> String {
        let demo = try String(contentsOf: TestFiles.repositoryRoot.appendingPathComponent("config/bridge.yaml"),
                              encoding: .utf8)
        guard let users = demo.range(of: "\nusers:") else { throw TestFailure("demo config has no users") }
        let base = settings.isEmpty ? "http:\n  legacy_routes: true\nsource:\n  interval: 0.2\n  seed: 7\n" : settings
        var text = base + String(demo[users.lowerBound...])
        if !text.hasSuffix("\n") { text += "\n" }
        return text
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    var pid: Int32 { process.pid }

    func signal(_ number: Int32) { process.signal(number) }

    func waitForExit(timeout: Double) -> Int32? { process.waitForExit(timeout: timeout) }

    /// Waits until the log contains `text`.
    func waitForLog(_ text: String, timeout: Double = 10) async -> Bool {
        await eventually(timeout: timeout) { log.contains(text) }
    }

    deinit {
        process.terminate()
        try? FileManager.default.removeItem(at: directory)
    }
}
