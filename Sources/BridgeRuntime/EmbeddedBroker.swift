import BridgeCrypto
import Foundation

/// A private mosquitto broker for a bridge configured without `mqtt.url`: bound to 127.0.0.1 on
/// a free port, its config in a temporary folder (never in the working tree), stopped with the bridge.
/// It admits no anonymous client (README, "Try it"): the bridge connects on an account whose
/// password exists only in memory, and people on the `local` account, whose password is in a file
/// only the bridge's own system user can read (`Access.localPasswordPath`).
public final class EmbeddedBroker: Sendable {
    /// The broker's two accounts and what each may do.
    public struct Access: Sendable {
        public static let bridgeUsername = "smarthome-bridge"
        public static let localUsername = "local"
        public var bridgePassword: String
        public var localPassword: String
        /// Where the local account's password is kept (next to the database).
        public var localPasswordPath: String
        public var baseTopic: String
        public var homeAssistantPrefix: String

        /// The ACL: the bridge reads and writes its topics; the local account reads them, may switch
        /// lights, send bridge requests (README, "Managing the home": whoever has its password can read
        /// the config and the database too) and use the Home Assistant prefix (as the stack's
        /// `homeassistant` account), but cannot publish a reading or a room.
        var aclText: String {
            """
            user \(Self.bridgeUsername)
            topic readwrite \(baseTopic)/#
            topic readwrite \(homeAssistantPrefix)/#

            user \(Self.localUsername)
            topic read \(baseTopic)/#
            topic write \(baseTopic)/+/+/lights/set
            topic write \(baseTopic)/bridge/request/#
            topic readwrite \(homeAssistantPrefix)/#

            """
        }

        /// The access of a bridge whose database is `storagePath`: a new bridge password each start;
        /// the local one read from `<database without extension>.mqtt-password`, made there (mode
        /// 0600) at the first start.
        public static func make(storagePath: String, baseTopic: String, homeAssistantPrefix: String)
            throws(Failure) -> Access
        {
            let path = (storagePath as NSString).deletingPathExtension + ".mqtt-password"
            var local = (try? String(contentsOfFile: path, encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            if local.isEmpty {
                local = randomPassword()
                let folder = (path as NSString).deletingLastPathComponent
                if !folder.isEmpty {
                    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                }
                guard FileManager.default.createFile(atPath: path, contents: Data((local + "\n").utf8),
                                                     attributes: [.posixPermissions: 0o600])
                else { throw Failure(description: "cannot write the embedded broker's password to \(path)") }
            }
            return Access(bridgePassword: randomPassword(), localPassword: local, localPasswordPath: path,
                          baseTopic: baseTopic, homeAssistantPrefix: homeAssistantPrefix)
        }

        /// 24 characters from 144 random bits, letters and digits only (safe in a shell and a URL).
        static func randomPassword() -> String {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
            var generator = SystemRandomNumberGenerator()
            return String((0..<24).map { _ in alphabet[Int(generator.next(upperBound: UInt32(alphabet.count)))] })
        }
    }

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
    public static func start(preferredPort: Int, access: Access) async throws(Failure) -> EmbeddedBroker {
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
                return try await launch(executable: executable, port: port, access: access)
            } catch {
                lastProblem = error.description
            }
        }
        throw Failure(description: "embedded mosquitto did not start: \(lastProblem)")
    }

    private static func launch(executable: String, port: Int, access: Access) async throws(Failure) -> EmbeddedBroker {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("smarthome-bridge-broker-\(UUID().uuidString.prefix(8))")
        let configFile = directory.appendingPathComponent("mosquitto.conf")
        let passwordFile = directory.appendingPathComponent("passwords")
        let aclFile = directory.appendingPathComponent("acl")
        let config = """
            # Written by smarthome-bridge for its embedded broker; removed when the bridge stops.
            listener \(port) 127.0.0.1
            allow_anonymous false
            password_file \(passwordFile.path)
            acl_file \(aclFile.path)
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
            try access.aclText.write(to: aclFile, atomically: true, encoding: .utf8)
            // The passwords are random, so a quick hash loses nothing and keeps the start fast.
            let hashes = try [(Access.bridgeUsername, access.bridgePassword), (Access.localUsername, access.localPassword)]
                .map { "\($0.0):\(try MosquittoPasswordHash.hash(password: $0.1, iterations: 1_000))\n" }.joined()
            guard FileManager.default.createFile(atPath: passwordFile.path, contents: Data(hashes.utf8),
                                                 attributes: [.posixPermissions: 0o600])
            else { throw Failure(description: "cannot write \(passwordFile.path)") }
            // Started as root, mosquitto reads the password file as its own user.
            if geteuid() == 0, let user = getpwnam("mosquitto") {
                chown(passwordFile.path, user.pointee.pw_uid, user.pointee.pw_gid)
            }
        } catch let failure as Failure {
            try? FileManager.default.removeItem(at: directory)
            throw failure
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
