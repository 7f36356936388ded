import Foundation

/// A private mosquitto broker for a bridge configured without `mqtt.url`: bound to 127.0.0.1 on
/// a free port, its config in a temporary folder (never in the working tree), stopped with the bridge.
public final class EmbeddedBroker: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let port: Int
    public var host: String { "127.0.0.1" }
    private let process: ChildProcess
    private let directory: URL

    private init(port: Int, process: ChildProcess, directory: URL) {
        self.port = port
        self.process = process
        self.directory = directory
    }

    /// Where mosquitto is looked for: `PATH`, then Debian's `/usr/sbin`.
    static func findExecutable() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = path.split(separator: ":").map { "\($0)/mosquitto" } + ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts mosquitto and waits until it accepts connections. Its warnings and errors go to a
    /// log file in its folder, which start-up failures quote.
    /// - Parameter preferredPort: tried first, so `mosquitto_sub` without `-p` finds the broker;
    ///   when it is taken (another broker?), or 0, any free port is used.
    public static func start(preferredPort: Int) async throws(Failure) -> EmbeddedBroker {
        guard let executable = findExecutable() else {
            throw Failure(description: "mosquitto is not installed (apt-get install mosquitto), and mqtt.url is not set")
        }
        var lastProblem = "no free port"
        var candidates: [Int?] = [nil, nil, nil]
        if preferredPort > 0, !LoopbackPort.isAccepting(port: preferredPort) { candidates.insert(preferredPort, at: 0) }
        // A port found free can be taken before mosquitto binds it; try a few.
        for candidate in candidates {
            guard let port = candidate ?? LoopbackPort.free() else { continue }
            do {
                return try await launch(executable: executable, port: port)
            } catch {
                lastProblem = error.description
            }
        }
        throw Failure(description: "embedded mosquitto did not start: \(lastProblem)")
    }

    private static func launch(executable: String, port: Int) async throws(Failure) -> EmbeddedBroker {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("smarthome-bridge-broker-\(UUID().uuidString.prefix(8))")
        let configFile = directory.appendingPathComponent("mosquitto.conf")
        let config = """
            # Written by smarthome-bridge for its embedded broker; removed when the bridge stops.
            listener \(port) 127.0.0.1
            allow_anonymous true
            persistence false
            set_tcp_nodelay true
            log_dest stderr
            log_type error
            log_type warning

            """
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            // mosquitto started as root drops to its own user and must still read its config.
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
            try config.write(to: configFile, atomically: true, encoding: .utf8)
        } catch {
            throw Failure(description: "cannot write \(configFile.path): \(error.localizedDescription)")
        }
        let logFile = directory.appendingPathComponent("mosquitto.log")
        let process: ChildProcess
        do {
            process = try ChildProcess.spawn(executable, ["-c", configFile.path], outputPath: logFile.path)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw Failure(description: error.description)
        }
        let broker = EmbeddedBroker(port: port, process: process, directory: directory)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, process.isRunning, !LoopbackPort.isAccepting(port: port) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Another process listening on the port would answer too; a mosquitto that could not bind
        // exits at once, so one still running a moment later is the one listening.
        try? await Task.sleep(for: .milliseconds(100))
        guard process.isRunning, LoopbackPort.isAccepting(port: port) else {
            let output = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
            broker.stop()
            throw Failure(description: output.trimmingCharacters(in: .whitespacesAndNewlines).suffix(300).description)
        }
        return broker
    }

    /// Stops the broker and removes its folder. Safe to call twice.
    public func stop() {
        process.terminate()
        try? FileManager.default.removeItem(at: directory)
    }
}
