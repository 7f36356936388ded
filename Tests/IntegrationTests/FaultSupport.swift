import BridgeCore
import BridgeMQTT
import BridgeRuntime
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A mosquitto the fault tests can crash (SIGKILL), freeze (SIGSTOP/SIGCONT), stop gracefully and
/// restart on the same port, optionally with persistence or a password file.
final class FaultBroker: @unchecked Sendable {
    private(set) var port = 0
    let directory: URL
    let persistence: Bool
    /// user name → password; `nil`: anonymous clients are let in.
    var accounts: [String: String]?
    private var process: ChildProcess?

    init(persistence: Bool = false, accounts: [String: String]? = nil) async throws {
        directory = try TestFiles.makeDirectory("fault-broker")
        self.persistence = persistence
        self.accounts = accounts
        try await TestBroker.onFreePort { port in
            self.port = port
            try await start()
        }
    }

    var url: String { "mqtt://127.0.0.1:\(port)" }
    var pid: Int32? { process?.pid }

    /// Starts (or restarts, on the same port) the broker; with persistence it loads what it saved.
    func start() async throws {
        var text = "listener \(port) 127.0.0.1\n"
        if let accounts {
            let file = directory.appendingPathComponent("passwords").path
            try? FileManager.default.removeItem(atPath: file)
            _ = FileManager.default.createFile(atPath: file, contents: nil)
            for (name, password) in accounts.sorted(by: { $0.key < $1.key }) {
                let tool = try ChildProcess.spawn("/usr/bin/mosquitto_passwd", ["-b", file, name, password])
                guard tool.waitForExit(timeout: 10) == 0 else { throw TestFailure("mosquitto_passwd failed") }
            }
            chmod(file, 0o644)  // mosquitto reads it after dropping root
            text += "allow_anonymous false\npassword_file \(file)\n"
        } else {
            text += "allow_anonymous true\n"
        }
        if persistence {
            let store = directory.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            chmod(store.path, 0o777)
            text += "persistence true\npersistence_location \(store.path)/\n"
        } else {
            text += "persistence false\n"
        }
        text += """
            max_queued_messages 100000
            log_dest stderr
            log_type error
            log_type warning

            """
        let config = directory.appendingPathComponent("mosquitto.conf")
        try text.write(to: config, atomically: true, encoding: .utf8)
        process = try await TestBroker.launch(config: config, port: port, log: directory.appendingPathComponent("log"))
    }

    /// SIGKILL: gone at once, nothing saved, as a crash.
    func kill() {
        process?.signal(SIGKILL)
        _ = process?.waitForExit(timeout: 5)
        process = nil
    }

    /// SIGTERM: mosquitto disconnects its clients and saves its store (with persistence).
    func stopGracefully() {
        process?.terminate(timeout: 10)
        process = nil
    }

    /// SIGSTOP: the process stays, its sockets stay open, nothing answers.
    func freeze() { process?.signal(SIGSTOP) }

    /// SIGCONT.
    func thaw() { process?.signal(SIGCONT) }

    deinit {
        process?.signal(SIGCONT)
        process?.terminate()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// An MQTT client for the fault tests: records every message with the time it arrived; optionally
/// with a persistent session (`cleanSession: false`), so the broker keeps what arrives for it
/// while it reconnects.
final class FaultSubscriber: Sendable {
    struct Received: Sendable {
        var message: MQTTMessage
        var at: Date
    }

    /// What arrived, and how often the client connected.
    private final class Record: Sendable {
        let received = Mutex<[Received]>([])
        let connections = Mutex(0)
    }

    let client: MQTTClient
    private let record = Record()
    private let consumer: Task<Void, Never>

    init(port: Int, subscribe filters: [String] = [], cleanSession: Bool = true, name: String = "fault") async throws {
        client = try MQTTClient(configuration: MQTTConfiguration(
            host: "127.0.0.1", port: port, clientID: "\(name)-\(UUID().uuidString.prefix(8))", keepalive: 10,
            reconnectMin: 0.2, reconnectMax: 1, cleanSession: cleanSession))
        let client = client
        let record = record
        consumer = Task {
            for await event in client.events {
                switch event {
                case .message(let message): record.received.withLock { $0.append(Received(message: message, at: Date())) }
                case .connected: record.connections.withLock { $0 += 1 }
                default: break
                }
            }
        }
        for filter in filters { try client.subscribe(filter, qos: 1) }
        try client.start()
        guard await eventuallyTrue(timeout: 10, { record.connections.withLock { $0 } > 0 }) else {
            throw TestFailure("test client could not connect to port \(port)")
        }
        try await Task.sleep(for: .milliseconds(300))  // the SUBACK
    }

    var messages: [Received] { record.received.withLock { $0 } }

    func publish(_ topic: String, _ payload: String, retain: Bool = false) throws {
        try client.publish(topic: topic, text: payload, qos: 1, retain: retain)
    }

    /// The first message on `topic` (with `payload`) that arrived at or after `since`.
    func waitFor(_ topic: String, payload: String? = nil, since: Date = .distantPast, timeout: Double = 10) async
        -> Received?
    {
        var found: Received?
        _ = await eventuallyTrue(timeout: timeout) {
            found = self.messages.first { $0.at >= since && $0.message.topic == topic && (payload == nil || $0.message.text == payload) }
            return found != nil
        }
        return found
    }

    deinit {
        client.stop()
        consumer.cancel()
    }
}

/// The bridge executable started without waiting for it to connect (BridgeProcess waits for its
/// first retained publish, which a bridge with wrong credentials or an untrusted broker never
/// makes); its database in its own temporary folder, as BridgeProcess's.
final class UnconnectedBridge: @unchecked Sendable {
    let httpPort: Int
    let directory: URL
    let logPath: String
    let process: ChildProcess

    init(settings: String = "", environment: [String: String]) async throws {
        directory = try TestFiles.makeDirectory("bridge")
        let started = try await BridgeProcess.launch(config: BridgeProcess.demoConfig(settings: settings),
                                                     in: directory, environment: environment)
        httpPort = started.httpPort
        logPath = started.logPath
        process = started.process
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The database file the bridge was given.
    var storagePath: String { directory.appendingPathComponent("bridge.sqlite").path }

    deinit {
        process.terminate()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Measurements and small helpers shared by the fault tests.
enum Fault {
    /// Bridge settings (YAML before the demo users) for the fault tests.
    /// - Parameter http: extra lines for the `http:` section, indented by two spaces.
    static func settings(interval: Double = 0.2, keepalive: Int = 10, reconnectMin: Double = 0.5,
                         reconnectMax: Double = 1, http: String = "") -> String {
        """
        http:
          legacy_routes: true
        \(http)
        source:
          interval: \(interval)
          seed: 7
        mqtt:
          keepalive: \(keepalive)
          reconnect_min: \(reconnectMin)
          reconnect_max: \(reconnectMax)

        """
    }

    /// Polls `/healthz` every 50 ms until it answers `status`; returns when it did.
    static func waitForHealth(_ port: Int, _ status: Int, timeout: Double) async -> Date? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let reply = try? await HTTP.get(port, "/healthz"), reply.status == status { return Date() }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// The times of the log lines that contain `text`.
    static func logTimes(_ log: String, containing text: String) -> [Date] {
        log.split(separator: "\n").filter { $0.contains(text) }.compactMap { line in
            line.split(separator: " ", maxSplits: 1).first.flatMap { try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(String($0)) }
        }
    }

    /// CPU seconds (user + system) a process has used.
    static func cpuSeconds(pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory of a process, in bytes.
    static func residentBytes(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 * 1024 }
    }

    /// Every sensor reading the bridge recorded (and so published) at or after `since`, per topic,
    /// oldest first, read back through the authenticated history API of both demo users.
    static func publishedReadings(httpPort: Int, since: Date, until: Date = .distantFuture) async throws
        -> [String: [String]]
    {
        var readings: [String: [String]] = [:]
        for (username, password, user) in [("Cemalettin", "12345", "1"), ("Mehmet", "123456", "2")] {
            let login = try await HTTP.send(httpPort, "/api/v1/login", method: "POST",
                                            body: Data(#"{"username":"\#(username)","password":"\#(password)"}"#.utf8))
            let json = try JSONSerialization.jsonObject(with: login.body) as? [String: Any]
            guard let token = json?["token"] as? String else { throw TestFailure("login failed: \(login.text)") }
            for room in MQTTBridgeTests.demoRooms[user] ?? [] {
                let extra = room == "kitchen" || room == "bathroom" ? "gas" : "movement"
                for sensor in ["temperature", "humidity", extra] {
                    let since = Timestamp.iso8601(since)
                    let reply = try await HTTP.send(
                        httpPort, "/api/v1/rooms/\(room)/history?sensor=\(sensor)&since=\(since)&limit=10000",
                        method: "GET", token: token)
                    let body = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
                    let points = body?["points"] as? [[String: Any]] ?? []
                    readings["smarthome/\(user)/\(room)/\(sensor)"] = points.compactMap { point -> String? in
                        guard let time = (point["t"] as? String).flatMap({
                            try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse($0)
                        }), time <= until else { return nil }
                        return point["v"] as? String
                    }
                }
            }
        }
        return readings
    }

    /// How many published readings a subscriber never received: per topic, the published
    /// sequence minus its longest common subsequence with what arrived (re-sends and the full
    /// republish after every connect may add messages; none may be missing).
    static func missing(published: [String: [String]], received: [FaultSubscriber.Received]) -> (missing: Int, total: Int) {
        var arrived: [String: [String]] = [:]
        for item in received { arrived[item.message.topic, default: []].append(item.message.text) }
        var missing = 0
        var total = 0
        for (topic, values) in published {
            total += values.count
            missing += values.count - longestCommonSubsequence(values, arrived[topic] ?? [])
        }
        return (missing, total)
    }

    static func longestCommonSubsequence(_ a: [String], _ b: [String]) -> Int {
        guard !a.isEmpty, !b.isEmpty else { return 0 }
        var previous = [Int](repeating: 0, count: b.count + 1)
        var current = previous
        for x in a {
            for (j, y) in b.enumerated() {
                current[j + 1] = x == y ? previous[j] + 1 : max(previous[j + 1], current[j])
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }

    /// Writes one measured figure where the reliability doc's numbers come from (and the log).
    static func report(_ test: String, _ figures: KeyValuePairs<String, String>) {
        let line = "FAULT-FIGURES \(test): " + figures.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        print(line)
        if let path = ProcessInfo.processInfo.environment["FAULT_FIGURES_FILE"],
           let handle = FileHandle(forWritingAtPath: path) ?? {
               _ = FileManager.default.createFile(atPath: path, contents: nil)
               return FileHandle(forWritingAtPath: path)
           }() {
            handle.seekToEndOfFile()
            handle.write(Data((line + "\n").utf8))
            try? handle.close()
        }
    }

    static func format(_ seconds: Double) -> String { String(format: "%.2f", seconds) }
}

/// Polls `condition` every 20 ms until it holds or `timeout` seconds pass.
func eventuallyTrue(timeout: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// Raw TCP clients for the HTTP abuse test, from any loopback source address (127.0.0.0/8 is all
/// loopback), so per-address limits can be exercised from one machine.
enum RawClient {
    /// A blocking socket from `source` to 127.0.0.1:`port`, or nil when the connection failed.
    static func connect(from source: String, port: Int, receiveTimeout: Int = 10) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let connected = bound == 0 && withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
        guard connected else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Sends everything it can; false when the peer stopped taking it.
    @discardableResult
    static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Reads until the peer closes, resets, or the receive timeout passes.
    static func readAll(_ fd: Int32, limit: Int = 1 << 20) -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while result.count < limit {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            result += buffer[0..<count]
        }
        return result
    }
}
