import BridgeCore
import BridgeCrypto
import Dispatch
import Foundation

/// The `smarthome-bridge` command line (README "Command line"). `main.swift` only calls `main`.
public enum CommandLineTool {
    static let usage = """
        Usage: smarthome-bridge [--config PATH]            run the bridge
               smarthome-bridge check-config [--config PATH] validate a config, list every problem
               smarthome-bridge hash-password [PASSWORD]   print an argon2id hash for users[].password_hash
                                                           (without PASSWORD: asks twice at a terminal, without
                                                           echo, or reads one line from standard input)
               smarthome-bridge mosquitto-acl [--config PATH] --password-file OUT --acl-file OUT [--passwords FILE]
                                                           write a mosquitto password file and ACL that confine
                                                           each user's MQTT account to <base>/<userID>/#
               smarthome-bridge --help | --version

        "run" may be written out (smarthome-bridge run --config PATH). Exit status: 0 on success
        (run: stopped by SIGINT or SIGTERM), 1 when the config has problems or the bridge fails,
        2 for a usage error or an unusable password.

        The config file defaults to $SMARTHOME_CONFIG, else config/bridge.yaml. Every key can be
        overridden by an environment variable: mqtt.url by SMARTHOME_MQTT_URL, http.port by
        SMARTHOME_HTTP_PORT, and so on. Without mqtt.url the bridge starts a private mosquitto on
        127.0.0.1 (the embedded broker).

        """

    /// Runs the command and returns the process exit status.
    public static func main(arguments: [String], environment: [String: String]) async -> Int32 {
        var rest = Array(arguments.dropFirst())
        var configPath = environment["SMARTHOME_CONFIG"] ?? ConfigFile.defaultPath
        var command = "run"
        var positional: [String] = []
        while !rest.isEmpty {
            let argument = rest.removeFirst()
            switch argument {
            case "--help", "-h", "help":
                print(usage, terminator: "")
                return 0
            case "--version":
                print("smarthome-bridge \(Bridge.version)")
                return 0
            case "--config", "-c":
                guard !rest.isEmpty else { return fail("--config needs a path") }
                configPath = rest.removeFirst()
            case _ where argument.hasPrefix("--config="):
                configPath = String(argument.dropFirst("--config=".count))
            case "mosquitto-acl" where command == "run" && positional.isEmpty:
                return MosquittoACLCommand.run(arguments: rest, configPath: configPath, environment: environment)
            case _ where ["run", "check-config", "hash-password"].contains(argument) && command == "run"
                && positional.isEmpty:
                command = argument
            case _ where argument.hasPrefix("-"):
                return fail("unknown option \(argument)\n\n\(usage)")
            default:
                positional.append(argument)
            }
        }
        switch command {
        case "hash-password":
            return hashPassword(positional)
        case "check-config":
            guard positional.isEmpty else { return fail("check-config takes no arguments besides --config") }
            return checkConfig(path: configPath, environment: environment)
        default:
            guard positional.isEmpty else { return fail("unknown command \(positional[0])\n\n\(usage)") }
            return await run(configPath: configPath, environment: environment)
        }
    }

    /// Writes the message to standard error; returns 2, the status of a usage error.
    private static func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("smarthome-bridge: \(message)\n".utf8))
        return 2
    }

    /// Problems make the exit status 1; warnings are listed (on standard error) but leave it 0.
    private static func checkConfig(path: String, environment: [String: String]) -> Int32 {
        let status: Int32
        let loaded = ConfigFile.load(path: path, environment: environment)
        // Valid but unsafe settings (README "Security model") are warnings too; the bridge logs them at start.
        let warnings = ConfigFile.warnings(configuration: try? loaded.get(), environment: environment).map(\.description)
            + ((try? loaded.get()).map(ConfigFile.unsafeSettings) ?? [])
        switch loaded {
        case .success(let config):
            let rooms = config.users.reduce(0) { $0 + $1.rooms.count }
            let warned = warnings.isEmpty ? "" : ", \(warnings.count) warning(s)"
            print("\(path): OK (\(config.users.count) users, \(rooms) rooms)\(warned)")
            status = 0
        case .failure(let problems):
            FileHandle.standardError.write(Data("\(path): \(problems.issues.count) problem(s)\n".utf8))
            for issue in problems.issues {
                FileHandle.standardError.write(Data("  \(issue)\n".utf8))
            }
            status = 1
        }
        for warning in warnings {
            FileHandle.standardError.write(Data("  warning: \(warning)\n".utf8))
        }
        return status
    }

    private static func hashPassword(_ positional: [String]) -> Int32 {
        let password: String
        if let given = positional.first {
            guard positional.count == 1 else { return fail("hash-password takes one password") }
            password = given
        } else {
            switch PasswordPrompt.read() {
            case .password(let line): password = line
            case .noInput: return fail("no password given (pass it as an argument or on standard input)")
            case .mismatch: return fail("the two passwords differ; nothing was hashed")
            }
        }
        guard !password.isEmpty else { return fail("the password must not be empty") }
        guard password.utf8.count <= PasswordPrompt.maximumLength else {
            return fail("the password is longer than \(PasswordPrompt.maximumLength) bytes")
        }
        do {
            print(try PasswordHasher.hash(password: password))
            return 0
        } catch {
            return fail(error.description)
        }
    }

    private static func run(configPath: String, environment: [String: String]) async -> Int32 {
        var configuration: BridgeConfiguration
        switch ConfigFile.load(path: configPath, environment: environment) {
        case .success(let loaded): configuration = loaded
            configuration.file = configPath
        case .failure(let problems):
            let lines = (problems.issues.map { "  \($0)" }
                + ConfigFile.warnings(configuration: nil, environment: environment).map { "  warning: \($0)" })
                .joined(separator: "\n")
            // 1 like check-config and mosquitto-acl for the same config; 2 is kept for usage errors.
            _ = fail("not starting: \(configPath) has \(problems.issues.count) problem(s)\n\(lines)")
            return 1
        }
        let loaded = configuration
        do {
            configuration = try ClientIdentity.applyingInstallDefault(to: configuration)
        } catch {
            return fail("not starting: \(error)")
        }
        let logger = Logger(level: configuration.log.level)
        logger.info("starting smarthome-bridge", ["version": Bridge.version, "config": configPath])
        for warning in ConfigFile.warnings(configuration: configuration, environment: environment) {
            logger.warning("\(warning.path) \(warning.message)")
        }

        var embedded: EmbeddedBroker?
        let broker: BrokerURL
        if let url = configuration.mqtt.url {
            broker = url
        } else {
            do {
                let access = try EmbeddedBroker.Access.make(
                    storagePath: configuration.storage.path, baseTopic: configuration.mqtt.baseTopic,
                    homeAssistantPrefix: configuration.homeAssistant.prefix)
                let started = try await EmbeddedBroker.start(preferredPort: configuration.mqtt.embeddedPort,
                                                             access: access)
                embedded = started
                broker = BrokerURL(host: started.host, port: started.port, tls: false)
                configuration.mqtt.username = EmbeddedBroker.Access.bridgeUsername
                configuration.mqtt.password = access.bridgePassword
                configuration.mqtt.passwordFile = nil
                logger.info("no mqtt.url set: started the embedded mosquitto broker",
                            ["listening": "mqtt://\(started.host):\(started.port)",
                             "local_account": EmbeddedBroker.Access.localUsername,
                             "password_file": access.localPasswordPath])
                let taken = started.port != configuration.mqtt.embeddedPort && configuration.mqtt.embeddedPort != 0
                let hint = "mosquitto_sub -p \(started.port) -u \(EmbeddedBroker.Access.localUsername) "
                    + "-P \"$(cat \(access.localPasswordPath))\" -v -t '\(configuration.mqtt.baseTopic)/#'"
                if taken {
                    logger.warning("port \(configuration.mqtt.embeddedPort) was taken (another broker?): watch with \(hint)")
                } else {
                    logger.info("watch with \(hint)")
                }
            } catch {
                logger.error("cannot start the embedded broker", ["error": error.description])
                return 1
            }
        }
        defer { embedded?.stop() }

        let bridge: Bridge
        do {
            bridge = try Bridge(configuration: configuration, broker: broker, logger: logger, configFile: configPath,
                                environment: environment, loaded: loaded)
        } catch {
            logger.error("cannot set up the bridge", ["error": "\(error)"])
            return 1
        }
        // The bridge's one root task (every feature runs in its task group): a task, not a child,
        // because the signal handler, on a Dispatch queue, must be able to cancel it.
        let task = Task { try await bridge.run() }
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM]) { signal in
            logger.info("received signal, stopping", ["signal": signal == SIGINT ? "SIGINT" : "SIGTERM"])
            task.cancel()
        }
        defer { signals.cancel() }
        let reloads = SignalWatcher(signals: [SIGHUP]) { _ in
            logger.info("received signal, reloading the config file", ["signal": "SIGHUP"])
            bridge.requestReload()
        }
        defer { reloads.cancel() }
        do {
            try await task.value
            logger.info("stopped")
            return 0
        } catch {
            logger.error("bridge stopped on an error", ["error": "\(error)"])
            return 1
        }
    }
}

/// Turns SIGINT/SIGTERM into a call on a Dispatch queue, where Swift code may run (a plain
/// signal handler may not).
///
/// `@unchecked Sendable`: the sources are set once in `init` and Dispatch sources are thread-safe.
final class SignalWatcher: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}
