import BridgeRuntime
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Which broker the core suites run against: mosquitto, or RabbitMQ's MQTT plugin when
/// `SMARTHOME_TEST_BROKER=rabbitmq` (`make test-rabbitmq`).
enum TestBrokerKind: String {
    case mosquitto
    case rabbitmq

    static let current = TestBrokerKind(
        rawValue: ProcessInfo.processInfo.environment["SMARTHOME_TEST_BROKER"] ?? "") ?? .mosquitto
}

/// One real RabbitMQ node with the MQTT plugin, shared by every test of the process: it takes
/// 10-20 s to boot, too long for one per test. Tests are kept apart by virtual hosts (each has its
/// own exchange, sessions and retained store): a test leases an unused one and connects as
/// `<vhost>:smarthome`, the MQTT plugin's way of choosing a vhost by user name.
///
/// Everything is on loopback and private to the node: AMQP, MQTT, Erlang distribution and an epmd
/// of its own on free ports, a node name, data and log folders in a temporary directory. The node
/// stops when the test process exits (atexit), and a watchdog shell stops it if the process dies
/// without running atexit.
final class TestRabbitMQ: Sendable {
    static let user = "smarthome"
    static let password = "smarthome-test"
    /// Vhosts created at boot (definitions file): more than the core suites use in one run.
    static let vhostCount = 48

    let mqttPort: Int
    let directory: URL
    private let amqpPort: Int
    private let distributionPort: Int
    private let epmdPort: Int
    private let state = Mutex<(watchdog: ChildProcess?, leased: Int)>((nil, 0))

    private static let shared = Mutex<TestRabbitMQ?>(nil)
    private static let booting = Mutex<Task<TestRabbitMQ, Error>?>(nil)

    /// The process's node, started on first use; `start()` again if a test killed it.
    static func node() async throws -> TestRabbitMQ {
        let task = booting.withLock { task in
            if let task { return task }
            let started = Task { () throws -> TestRabbitMQ in
                let node = try TestRabbitMQ()
                try await node.start()
                shared.withLock { $0 = node }
                atexit {
                    guard let node = TestRabbitMQ.shared.withLock({ $0 }) else { return }
                    node.stop()
                    try? FileManager.default.removeItem(at: node.directory)
                }
                return node
            }
            task = started
            return started
        }
        return try await task.value
    }

    private init() throws {
        directory = try TestFiles.makeDirectory("rabbitmq")
        let ports = (0..<4).compactMap { _ in LoopbackPort.free() }
        guard ports.count == 4 else { throw TestFailure("no free ports for RabbitMQ") }
        (mqttPort, amqpPort, distributionPort, epmdPort) = (ports[0], ports[1], ports[2], ports[3])
        try writeConfiguration()
    }

    /// A vhost no test has used yet.
    func leaseVhost() throws -> String {
        let number = state.withLock { state in
            state.leased += 1
            return state.leased
        }
        guard number <= Self.vhostCount else {
            throw TestFailure("all \(Self.vhostCount) RabbitMQ test vhosts are used; raise vhostCount")
        }
        return "t\(number)"
    }

    private var log: URL { directory.appendingPathComponent("server.log") }
    private var pidFile: URL { directory.appendingPathComponent("rabbit.pid") }

    private func writeConfiguration() throws {
        let files = directory.path
        // The dets retained store is the plugin's default in 3.10 (its .app file); named anyway,
        // so the tests do not depend on a default a later version may change.
        try """
            listeners.tcp.default = 127.0.0.1:\(amqpPort)
            mqtt.listeners.tcp.default = 127.0.0.1:\(mqttPort)
            mqtt.allow_anonymous = false
            mqtt.retained_message_store = rabbit_mqtt_retained_msg_store_dets
            distribution.listener.interface = 127.0.0.1
            distribution.listener.port_range.min = \(distributionPort)
            distribution.listener.port_range.max = \(distributionPort)
            loopback_users = none
            load_definitions = \(files)/definitions.json
            log.file.level = warning

            """.write(to: directory.appendingPathComponent("rabbitmq.conf"), atomically: true, encoding: .utf8)
        try "[rabbitmq_mqtt].\n".write(to: directory.appendingPathComponent("enabled_plugins"), atomically: true,
                                      encoding: .utf8)
        let vhosts = (1...Self.vhostCount).map { "t\($0)" }
        let definitions: [String: Any] = [
            "users": [["name": Self.user, "password": Self.password, "tags": ""]],
            "vhosts": vhosts.map { ["name": $0] },
            "permissions": vhosts.map {
                ["user": Self.user, "vhost": $0, "configure": ".*", "write": ".*", "read": ".*"]
            },
        ]
        try JSONSerialization.data(withJSONObject: definitions)
            .write(to: directory.appendingPathComponent("definitions.json"))
        // The watchdog: runs the server in the background and stops it when the test process
        // (its parent) is gone, then stops the node's own epmd, which daemonizes and would stay.
        try """
            #!/bin/sh
            test_process=$PPID
            /usr/lib/rabbitmq/bin/rabbitmq-server &
            server=$!
            trap 'kill -TERM $server' TERM
            while kill -0 $server 2>/dev/null; do
                kill -0 $test_process 2>/dev/null || kill -TERM $server
                sleep 1
            done
            wait $server
            epmd -port $ERL_EPMD_PORT -kill >/dev/null 2>&1
            exit 0

            """.write(to: directory.appendingPathComponent("run.sh"), atomically: true, encoding: .utf8)
    }

    /// Boots the node (again, after `kill()`, with the same ports, data and vhosts); returns
    /// once it accepts MQTT logins.
    func start() async throws {
        let files = directory.path
        let environment = [
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": files,  // the Erlang cookie goes here, not into root's home
            "LANG": "C.UTF-8",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": String(epmdPort),
            "RABBITMQ_NODENAME": "smarthome-test-\(getpid())-\(mqttPort)@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": String(amqpPort),
            "RABBITMQ_DIST_PORT": String(distributionPort),
            "RABBITMQ_MNESIA_BASE": "\(files)/mnesia",
            "RABBITMQ_LOG_BASE": "\(files)/log",
            "RABBITMQ_CONFIG_FILE": "\(files)/rabbitmq.conf",
            "RABBITMQ_ADVANCED_CONFIG_FILE": "\(files)/advanced.config",
            "RABBITMQ_ENABLED_PLUGINS_FILE": "\(files)/enabled_plugins",
            "RABBITMQ_PID_FILE": pidFile.path,
            "RABBITMQ_CONF_ENV_FILE": "/dev/null",  // not /etc/rabbitmq/rabbitmq-env.conf
        ]
        try? FileManager.default.removeItem(at: pidFile)
        // The log is appended to: after a `kill()` it still holds the last boot's lines, so only what
        // this boot writes is read.
        let bootStart = ((try? FileManager.default.attributesOfItem(atPath: log.path))?[.size] as? Int) ?? 0
        func bootOutput() -> String {
            String(decoding: ((try? Data(contentsOf: log)) ?? Data()).dropFirst(bootStart), as: UTF8.self)
        }
        let watchdog = try ChildProcess.spawn("/bin/sh", ["\(files)/run.sh"], environment: environment,
                                              outputPath: log.path)
        state.withLock { $0.watchdog = watchdog }
        // The MQTT port accepts before the definitions (users, vhosts) are loaded; the server
        // prints this line when it is all done.
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, watchdog.isRunning {
            if bootOutput().contains("Starting broker... completed") { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        let output = bootOutput()
        stop()
        throw TestFailure("RabbitMQ did not start (MQTT port \(mqttPort)):\n\(output.suffix(3000))")
    }

    /// Kills the Erlang VM at once, as a crash would; `start()` brings the node back.
    func kill() {
        if let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = Int32(text.trimmed) {
            Glibc.kill(pid, SIGKILL)
        }
        _ = state.withLock { $0.watchdog }?.waitForExit(timeout: 15)
    }

    /// A clean shutdown (the watchdog passes SIGTERM on to the server script).
    func stop() {
        guard let watchdog = state.withLock({ $0.watchdog }) else { return }
        if watchdog.waitForExit(timeout: 0) == nil {
            watchdog.signal(SIGTERM)
            if watchdog.waitForExit(timeout: 30) == nil { kill() }
        }
    }
}

private extension String {
    var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
