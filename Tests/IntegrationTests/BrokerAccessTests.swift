import BridgeMQTT
import BridgeRuntime
import Foundation
import Synchronization
import Testing

/// `smarthome-bridge mosquitto-acl` against a real mosquitto run with `allow_anonymous false` and
/// the files it wrote: each user's MQTT account is confined to its own topics, the bridge's account
/// runs the bridge, over plain MQTT and over TLS.
///
/// mosquitto (2.0, MQTT 3.1.1) drops a publish or delivery the ACL denies without telling the
/// client, so every "cannot" below is checked after a positive control on the same connection has
/// gone through, then a short bounded wait.
@Suite(.timeLimit(.minutes(2)))
struct BrokerAccessTests {
    static let cemalettinPassword = "cem-mqtt-pass"
    static let mehmetPassword = "meh:mqtt pass"

    @Test func usersAreConfinedToTheirOwnTopics() async throws {
        let files = try AccessFiles.make()
        let broker = try await SecuredBroker(files: files)

        // Nobody gets in without an account and its password.
        let anonymous = try AccountClient(port: broker.port, username: nil, password: nil)
        #expect(await anonymous.firstOutcome()?.hasPrefix("refused") == true)
        let wrongPassword = try AccountClient(port: broker.port, username: "Cemalettin", password: "12345")
        #expect(await wrongPassword.firstOutcome()?.hasPrefix("refused") == true)
        let stranger = try AccountClient(port: broker.port, username: "Nobody", password: Self.cemalettinPassword)
        #expect(await stranger.firstOutcome()?.hasPrefix("refused") == true)

        // The real bridge runs on its own account.
        let bridge = try await BridgeProcess(broker: nil, environment: files.bridgeEnvironment(url: broker.url))
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 200))
        let observer = try AccountClient(port: broker.port, username: files.bridgeUsername,
                                         password: files.bridgePassword, subscribe: ["smarthome/#"])
        #expect(await observer.firstOutcome() == "connected")
        try await observer.waitFor { $0.topic == "smarthome/2/kitchen/temperature" && $0.retain }
        let kitchenTemperature = try #require(observer.last("smarthome/1/kitchen/temperature"))

        // Cemalettin reads his own retained state, and nothing of Mehmet's or the bridge's, though he
        // asks for everything.
        let cemalettin = try AccountClient(port: broker.port, username: "Cemalettin", password: Self.cemalettinPassword,
                                           subscribe: ["smarthome/#", "smarthome/2/#", "smarthome/1/#"])
        #expect(await cemalettin.firstOutcome() == "connected")
        let lights = try await cemalettin.waitFor { $0.topic == "smarthome/1/kitchen/lights" && $0.retain }
        try await cemalettin.waitFor { $0.topic == "smarthome/1/kitchen" && $0.retain }
        let mehmet = try AccountClient(port: broker.port, username: "Mehmet", password: Self.mehmetPassword,
                                       subscribe: ["smarthome/#"])
        #expect(await mehmet.firstOutcome() == "connected")
        try await mehmet.waitFor { $0.topic == "smarthome/2/kitchen/lights" && $0.retain }

        // He switches his own light.
        let before = lights.text
        let flipped = before == "ON" ? "OFF" : "ON"
        var mark = observer.messages.count
        try cemalettin.publish("smarthome/1/kitchen/lights/set", "TOGGLE")
        try await observer.waitFor(after: mark) { $0.topic == "smarthome/1/kitchen/lights" && $0.text == flipped }
        try await cemalettin.waitFor(after: 0) { $0.topic == "smarthome/1/kitchen/lights" && $0.text == flipped }

        // He can neither fake a reading nor switch Mehmet's light. His next command is the barrier:
        // the broker handles one client's publishes in order, so once it has switched the light
        // back, the two publishes before it have been dealt with.
        let mehmetLights = observer.messages.filter { $0.topic == "smarthome/2/kitchen/lights" }.count
        mark = observer.messages.count
        try cemalettin.publish("smarthome/1/kitchen/temperature", "99.9", retain: true)
        try cemalettin.publish("smarthome/2/kitchen/lights/set", "TOGGLE")
        try cemalettin.publish("smarthome/1/kitchen/lights/set", "TOGGLE")
        #expect(await cemalettin.client.waitForPublished(timeout: 10))
        try await observer.waitFor(after: mark) { $0.topic == "smarthome/1/kitchen/lights" && $0.text == before }
        try await Task.sleep(for: .milliseconds(500))

        let fakes = (observer.messages + cemalettin.messages + mehmet.messages).filter { $0.text == "99.9" }.count
        #expect(fakes == 0, "a denied publish was delivered")
        #expect(observer.messages.filter { $0.topic == "smarthome/2/kitchen/lights" }.count == mehmetLights)
        let log = bridge.log
        let ownSwitches = log.components(separatedBy: "light switched user=1 room=kitchen").count - 1
        let mehmetsSwitched = log.contains("light switched user=2")
        #expect(ownSwitches == 2)
        #expect(!mehmetsSwitched, "Cemalettin switched Mehmet's light")
        let fresh = try AccountClient(port: broker.port, username: files.bridgeUsername, password: files.bridgePassword,
                                      subscribe: ["smarthome/1/kitchen/temperature"])
        let retained = try await fresh.waitFor { $0.topic == "smarthome/1/kitchen/temperature" && $0.retain }
        #expect(retained.text != "99.9")
        #expect(Double(retained.text) != nil, "the bridge's reading, e.g. \(kitchenTemperature)")

        // His every-light command is his too (README, "Groups"), Mehmet's is not; his own comes second,
        // so once it is applied the broker has dealt with the other.
        mark = observer.messages.count
        try cemalettin.publish("smarthome/2/lights/set", "ON")
        try cemalettin.publish("smarthome/1/lights/set", "ON")
        #expect(await cemalettin.client.waitForPublished(timeout: 10))
        try await observer.waitFor(after: mark) { $0.topic == "smarthome/1/lights" && $0.text == "ON" }
        try await observer.waitFor(after: mark) { $0.topic == "smarthome/1/garden/lights" && $0.text == "ON" }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!bridge.log.contains("light switched user=2"), "Cemalettin switched Mehmet's lights")

        // Nothing outside each user's own subtree ever reached them, while the bridge's account saw both.
        let foreign = Set(cemalettin.messages.map(\.topic).filter { !$0.hasPrefix("smarthome/1/") }).sorted()
        #expect(foreign.count == 0, "Cemalettin received \(foreign.prefix(5))")
        let foreignToMehmet = Set(mehmet.messages.map(\.topic).filter { !$0.hasPrefix("smarthome/2/") }).sorted()
        #expect(foreignToMehmet.count == 0, "Mehmet received \(foreignToMehmet.prefix(5))")
        #expect(observer.messages.contains { $0.topic.hasPrefix("smarthome/1/") })
        #expect(observer.messages.contains { $0.topic.hasPrefix("smarthome/2/") })
        #expect(observer.messages.contains { $0.topic == "smarthome/bridge/state" && $0.text == "online" })
    }

    @Test func theBridgeConnectsOverTLSAndRefusesABrokerItCannotVerify() async throws {
        let files = try AccessFiles.make()
        let pki = try TestPKI(directory: files.directory)
        let broker = try await SecuredBroker(files: files, tls: pki)
        #expect(broker.url.hasPrefix("mqtts://127.0.0.1:"))

        var environment = files.bridgeEnvironment(url: broker.url)
        environment["SMARTHOME_MQTT_TLS_CA"] = pki.caFile
        let bridge = try await BridgeProcess(broker: nil, environment: environment)
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 200))
        let cemalettin = try AccountClient(port: broker.port, username: "Cemalettin", password: Self.cemalettinPassword,
                                           tls: MQTTConfiguration.TLS(caFile: pki.caFile), subscribe: ["smarthome/1/#"])
        #expect(await cemalettin.firstOutcome() == "connected")
        try await cemalettin.waitFor { $0.topic == "smarthome/1/kitchen/temperature" && $0.retain }

        // The same bridge trusting another CA: the handshake fails, so it never connects.
        environment["SMARTHOME_MQTT_TLS_CA"] = pki.otherCAFile
        let untrusting = try await UnconnectedBridge(environment: environment)
        #expect(await HTTP.waitForStatus(untrusting.httpPort, "/healthz", 503))
        // Its database is its own temporary one, never the checkout's data/bridge.sqlite (make run's).
        #expect(FileManager.default.fileExists(atPath: untrusting.storagePath))
        #expect(await broker.waitForLog("unknown ca"), "broker log:\n\(broker.log)")
        for _ in 0..<10 {
            #expect(try await HTTP.get(untrusting.httpPort, "/healthz").status == 503)
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(!untrusting.log.contains("connected to broker"), "\(untrusting.log)")
        #expect(!untrusting.log.contains("published retained state"))
    }

    @Test func missingOptionsAndBadInputsAreClearErrors() throws {
        let directory = try TestFiles.makeDirectory("acl-errors")
        defer { try? FileManager.default.removeItem(at: directory) }
        let demo = TestFiles.repositoryRoot.appendingPathComponent("config/bridge.yaml").path
        let passwordFile = directory.appendingPathComponent("passwd").path
        let aclFile = directory.appendingPathComponent("acl").path

        let noACL = try CheckConfigTests.run(["mosquitto-acl", "--config", demo, "--password-file", passwordFile])
        #expect(noACL.status == 2)
        #expect(noACL.text.contains("--acl-file OUT is required"))
        let noPasswordFile = try CheckConfigTests.run(["mosquitto-acl", "--acl-file", aclFile])
        #expect(noPasswordFile.status == 2)
        #expect(noPasswordFile.text.contains("--password-file OUT is required"))

        let outputs = ["--password-file", passwordFile, "--acl-file", aclFile]
        let missing = try CheckConfigTests.run(["mosquitto-acl", "--config", demo, "--passwords", "/nonexistent/pw"]
            + outputs)
        #expect(missing.status == 1)
        #expect(missing.text.contains("cannot read --passwords /nonexistent/pw: No such file or directory"))

        let malformed = directory.appendingPathComponent("passwords").path
        try "# ok\nCemalettin:fine\nMehmet-without-colon-secret\n"
            .write(toFile: malformed, atomically: true, encoding: .utf8)
        let bad = try CheckConfigTests.run(["mosquitto-acl", "--config", demo, "--passwords", malformed] + outputs)
        #expect(bad.status == 1)
        #expect(bad.text.contains("line 3: expected name:password"))
        #expect(!bad.text.contains("secret"))

        let badConfig = try CheckConfigTests.run(["mosquitto-acl", "--config", "/nonexistent/bridge.yaml"] + outputs)
        #expect(badConfig.status == 1)
        #expect(badConfig.text.contains("/nonexistent/bridge.yaml"))
        #expect(!FileManager.default.fileExists(atPath: passwordFile))
        #expect(!FileManager.default.fileExists(atPath: aclFile))

        // The config's bridge password (here from the environment) is used, and nothing is generated.
        let all = directory.appendingPathComponent("all").path
        try "Cemalettin:c\nMehmet:m\n".write(toFile: all, atomically: true, encoding: .utf8)
        let configured = try CheckConfigTests.run(
            ["mosquitto-acl", "--config", demo, "--passwords", all] + outputs,
            environment: ["SMARTHOME_MQTT_USERNAME": "hub", "SMARTHOME_MQTT_PASSWORD": "hub-secret"])
        #expect(configured.status == 0, "\(configured.text)")
        #expect(!configured.text.contains("shown only this once"))
        let hubLine = try String(contentsOfFile: passwordFile, encoding: .utf8).split(separator: "\n").first
        #expect(hubLine?.hasPrefix("hub:$7$210000$") == true)
    }
}

// MARK: - Helpers

/// The files `smarthome-bridge mosquitto-acl` wrote for the demo config, in a temporary folder
/// removed with this object.
final class AccessFiles: Sendable {
    let directory: URL
    let passwordFile: String
    let aclFile: String
    let bridgeUsername = "smarthome-bridge"
    /// Generated by the command (the passwords file lists only the users), read from its output.
    let bridgePassword: String

    private init(directory: URL, passwordFile: String, aclFile: String, bridgePassword: String) {
        self.directory = directory
        self.passwordFile = passwordFile
        self.aclFile = aclFile
        self.bridgePassword = bridgePassword
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs the real binary on `config` (the demo's `config/bridge.yaml`) and checks what it wrote.
    static func make(config: String = TestFiles.repositoryRoot.appendingPathComponent("config/bridge.yaml").path) throws
        -> AccessFiles
    {
        let directory = try TestFiles.makeDirectory("acl")
        var keep = false
        defer { if !keep { try? FileManager.default.removeItem(at: directory) } }
        let passwords = directory.appendingPathComponent("mqtt-passwords.txt").path
        try """
            # MQTT passwords for the demo users
            Cemalettin:\(BrokerAccessTests.cemalettinPassword)

            Mehmet:\(BrokerAccessTests.mehmetPassword)

            """.write(toFile: passwords, atomically: true, encoding: .utf8)
        let passwordFile = directory.appendingPathComponent("passwd").path
        let aclFile = directory.appendingPathComponent("acl").path
        let output = try CheckConfigTests.run([
            "mosquitto-acl", "--config", config, "--password-file", passwordFile, "--acl-file", aclFile, "--passwords", passwords,
        ])
        guard output.status == 0 else { throw TestFailure("mosquitto-acl failed (\(output.status)):\n\(output.text)") }

        // Only the bridge's password was generated and shown, once; the users' never are.
        let lines = output.text.split(separator: "\n").map(String.init)
        let generated = lines.filter { $0.wholeMatch(of: /[^#\s][^:\s]*:[A-Za-z0-9_-]{24}/) != nil }
        guard generated.count == 1, let line = generated.first, line.hasPrefix("smarthome-bridge:") else {
            throw TestFailure("expected one generated password, for smarthome-bridge:\n\(output.text)")
        }
        guard output.text.contains("shown only this once"),
              !output.text.contains(BrokerAccessTests.cemalettinPassword),
              !output.text.contains(BrokerAccessTests.mehmetPassword)
        else { throw TestFailure("unexpected output:\n\(output.text)") }

        let manager = FileManager.default
        let passwordMode = (try manager.attributesOfItem(atPath: passwordFile)[.posixPermissions] as? Int) ?? 0
        let aclMode = (try manager.attributesOfItem(atPath: aclFile)[.posixPermissions] as? Int) ?? 0
        guard passwordMode == 0o600, aclMode == 0o644 else {
            throw TestFailure("modes \(String(passwordMode, radix: 8)) and \(String(aclMode, radix: 8))")
        }
        let accounts = try String(contentsOfFile: passwordFile, encoding: .utf8).split(separator: "\n")
            .map { $0.prefix { $0 != ":" } }
        guard accounts == ["smarthome-bridge", "Cemalettin", "Mehmet"] else {
            throw TestFailure("password file accounts: \(accounts)")
        }
        keep = true
        return AccessFiles(directory: directory, passwordFile: passwordFile, aclFile: aclFile,
                           bridgePassword: String(line.dropFirst("smarthome-bridge:".count)))
    }

    /// The bridge's environment for its own account on `url`.
    func bridgeEnvironment(url: String) -> [String: String] {
        ["SMARTHOME_MQTT_URL": url, "SMARTHOME_MQTT_USERNAME": bridgeUsername, "SMARTHOME_MQTT_PASSWORD": bridgePassword]
    }

    /// Run as root, mosquitto drops to its own user before it reads the password file and TLS key,
    /// so they must be that user's, as in a real deployment.
    static func makeReadableByMosquitto(_ path: String) {
        guard geteuid() == 0, let user = getpwnam("mosquitto") else { return }
        chown(path, user.pointee.pw_uid, user.pointee.pw_gid)
    }
}

/// A CA, a server certificate it signed for 127.0.0.1 and localhost, and an unrelated second CA,
/// made with the `openssl` command line; `issue` signs more certificates with the CA.
struct TestPKI {
    let directory: URL
    let caFile: String
    let certFile: String
    let keyFile: String
    let otherCAFile: String

    init(directory: URL) throws {
        self.directory = directory
        caFile = directory.appendingPathComponent("ca.crt").path
        otherCAFile = directory.appendingPathComponent("other-ca.crt").path
        for (subject, name) in [("/CN=SmartHomeBridge Test CA", "ca"), ("/CN=Some Other CA", "other-ca")] {
            try Self.openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", subject,
                              "-keyout", "\(name).key", "-out", "\(name).crt"], in: directory)
        }
        let server = try Self.issue("server", subject: "/CN=127.0.0.1",
                                    extensions: "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
                                    in: directory)
        certFile = server.cert
        keyFile = server.key
    }

    /// A key and a certificate for `subject` signed by the CA, with `extensions` (openssl
    /// extension-file lines); the key readable by mosquitto, as a broker's must be.
    func issue(_ name: String, subject: String, extensions: String) throws -> (cert: String, key: String) {
        try Self.issue(name, subject: subject, extensions: extensions, in: directory)
    }

    private static func issue(_ name: String, subject: String, extensions: String, in directory: URL) throws
        -> (cert: String, key: String)
    {
        try ("basicConstraints=CA:FALSE\n" + extensions)
            .write(to: directory.appendingPathComponent("\(name).ext"), atomically: true, encoding: .utf8)
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", "\(name).key",
                     "-out", "\(name).csr"], in: directory)
        try openssl(["x509", "-req", "-in", "\(name).csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                     "-days", "2", "-extfile", "\(name).ext", "-out", "\(name).crt"], in: directory)
        let key = directory.appendingPathComponent("\(name).key").path
        AccessFiles.makeReadableByMosquitto(key)
        return (directory.appendingPathComponent("\(name).crt").path, key)
    }

    /// Runs the openssl command line in `directory` (file names in `arguments` are relative to it).
    private static func openssl(_ arguments: [String], in directory: URL) throws {
        let log = directory.appendingPathComponent("openssl.log").path
        let absolute = arguments.map { argument in
            argument.hasSuffix(".key") || argument.hasSuffix(".crt") || argument.hasSuffix(".csr") || argument.hasSuffix(".ext")
                ? directory.appendingPathComponent(argument).path : argument
        }
        let openssl = try ChildProcess.spawn("/usr/bin/openssl", absolute, outputPath: log)
        guard openssl.waitForExit(timeout: 30) == 0 else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw TestFailure("openssl \(arguments[0]) failed:\n\(output)")
        }
    }
}

/// A mosquitto with `allow_anonymous false` and the password and ACL files `mosquitto-acl` wrote,
/// on a free loopback port, with a TLS listener when given certificates. (TestBroker's own config
/// stays as it is: anonymous and plain.)
final class SecuredBroker: @unchecked Sendable {
    private(set) var port = 0
    let directory: URL
    let tls: Bool
    private var process: ChildProcess?

    init(files: AccessFiles, tls pki: TestPKI? = nil) async throws {
        directory = try TestFiles.makeDirectory("secured-broker")
        tls = pki != nil
        AccessFiles.makeReadableByMosquitto(files.passwordFile)
        try await TestBroker.onFreePort { port in
            self.port = port
            try await start(files: files, pki: pki)
        }
    }

    var url: String { "\(tls ? "mqtts" : "mqtt")://127.0.0.1:\(port)" }

    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("log"), encoding: .utf8)) ?? ""
    }

    private func start(files: AccessFiles, pki: TestPKI?) async throws {
        let config = directory.appendingPathComponent("mosquitto.conf")
        var text = "listener \(port) 127.0.0.1\n"
        if let pki {
            text += "cafile \(pki.caFile)\ncertfile \(pki.certFile)\nkeyfile \(pki.keyFile)\n"
        }
        text += """
            allow_anonymous false
            password_file \(files.passwordFile)
            acl_file \(files.aclFile)
            persistence false
            log_dest stderr
            log_type error
            log_type warning
            log_type notice
            log_type information

            """
        try text.write(to: config, atomically: true, encoding: .utf8)
        process = try await TestBroker.launch(config: config, port: port, log: directory.appendingPathComponent("log"))
    }

    /// Waits until the broker's log contains `text`.
    func waitForLog(_ text: String, timeout: Double = 10) async -> Bool {
        await eventually(timeout: timeout) { log.contains(text) }
    }

    deinit {
        process?.terminate()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// An MQTT client on one account: records whether the broker let it in and what it received.
final class AccountClient: Sendable {
    let client: MQTTClient
    private let received = MessageLog()
    private let outcomes = OutcomeLog()
    private let consumer: Task<Void, Never>

    init(port: Int, username: String?, password: String?, tls: MQTTConfiguration.TLS? = nil,
         subscribe filters: [String] = [], clientID: String? = nil) throws {
        client = try MQTTClient(configuration: MQTTConfiguration(
            host: "127.0.0.1", port: port, clientID: clientID ?? "acl-test-\(UUID().uuidString.prefix(8))",
            username: username, password: password, keepalive: 10, tls: tls))
        let client = client
        let received = received
        let outcomes = outcomes
        consumer = Task {
            for await event in client.events {
                switch event {
                case .message(let message): received.append(message)
                case .connected: outcomes.append("connected")
                case .refused(let reason): outcomes.append("refused: \(reason)")
                case .disconnected: break
                }
            }
        }
        for filter in filters { try client.subscribe(filter, qos: 1) }
        try client.start()
    }

    /// The broker's answer to the first connection attempt: `connected` or `refused: <reason>`.
    func firstOutcome(timeout: Double = 10) async -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let first = outcomes.first { return first }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return outcomes.first
    }

    var messages: [MQTTMessage] { received.all }

    func last(_ topic: String) -> String? {
        messages.last { $0.topic == topic }?.text
    }

    /// Waits until a message from the `after`-th on satisfies `predicate`; returns it.
    @discardableResult
    func waitFor(timeout: Double = 10, after index: Int = 0, _ predicate: (MQTTMessage) -> Bool) async throws
        -> MQTTMessage
    {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let found = messages.dropFirst(index).first(where: predicate) { return found }
            try await Task.sleep(for: .milliseconds(20))
        } while Date() < deadline
        throw TestFailure("no matching message within \(timeout) s; got \(messages.count) messages")
    }

    func publish(_ topic: String, _ payload: String, retain: Bool = false) throws {
        try client.publish(topic: topic, text: payload, qos: 1, retain: retain)
    }

    deinit {
        client.stop()
        consumer.cancel()
    }
}

/// Connection outcomes seen on the client's thread, read by the test.
final class OutcomeLog: Sendable {
    private let lock = Mutex<[String]>([])

    func append(_ outcome: String) { lock.withLock { $0.append(outcome) } }
    var first: String? { lock.withLock { $0.first } }
}
