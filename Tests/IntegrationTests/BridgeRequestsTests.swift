import Foundation
import Testing

/// Requests over MQTT (README, "Managing the home"): `<base>/bridge/request/<action>` answered on
/// `<base>/bridge/response/<action>` with the transaction, errors too; and who may publish there
/// on a real mosquitto with the files `mosquitto-acl` wrote.
@Suite(.timeLimit(.minutes(3)))
struct BridgeRequestsTests {
    static func object(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    /// Publishes a request and waits for the answer that carries its transaction.
    static func ask(_ client: TestSubscriber, _ action: String, _ body: String, transaction: String) async throws
        -> [String: Any]
    {
        try client.publish("smarthome/bridge/request/\(action)", body)
        let reply = try await client.waitFor { message in
            message.topic == "smarthome/bridge/response/\(action)"
                && (object(message.text)["transaction"] as? String) == transaction
        }
        #expect(!reply.retain, "answers are not retained")
        return object(reply.text)
    }

    static func error(_ reply: [String: Any]) -> String { reply["error"] as? String ?? "" }
    static func data(_ reply: [String: Any]) -> [String: Any] { reply["data"] as? [String: Any] ?? [:] }

    @Test func roomRequestsAreAnsweredWithTheirTransactionAndErrorsToo() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let client = try await TestSubscriber(broker: broker, subscribe: [
            "smarthome/bridge/response/#", "smarthome/1/office", "smarthome/1/office/lights",
        ])

        let added = try await Self.ask(client, "room/add", #"{"user":"1","name":"Office","transaction":"t1"}"#,
                                       transaction: "t1")
        #expect(added["status"] as? String == "ok", "\(added)")
        #expect(Self.data(added)["id"] as? String == "office")
        #expect(Self.data(added)["sensors"] as? [String] == ["Temperature", "Humidity", "Lights", "Movement"])
        try await client.waitFor("smarthome/1/office")
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/1/Office").status == 200)

        let renamed = try await Self.ask(client, "room/rename",
                                         #"{"user":"1","room":"office","name":"Study","transaction":"t2"}"#, transaction: "t2")
        #expect(renamed["status"] as? String == "ok", "\(renamed)")
        #expect(Self.data(renamed)["name"] as? String == "Study")
        #expect(Self.data(renamed)["id"] as? String == "office")

        let bound = try await Self.ask(client, "sensor/bind", #"""
            {"user":"1","room":"study","sensor":{"name":"Lights","tasmota":{"topic":"study_lamp"}},"transaction":"t3"}
            """#, transaction: "t3")
        #expect(bound["status"] as? String == "ok", "\(bound)")
        try client.publish("stat/study_lamp/POWER", "ON")
        try await client.waitFor("smarthome/1/office/lights", payload: "ON")

        // Errors, answered with what was wrong.
        try client.publish("smarthome/bridge/request/room/add", "{not json")
        let malformed = try await client.waitFor { $0.topic == "smarthome/bridge/response/room/add"
            && Self.object($0.text)["status"] as? String == "error" }
        #expect(Self.error(Self.object(malformed.text)) == "request body is not valid JSON")
        try client.publish("smarthome/bridge/request/room/explode", #"{"transaction":"t4"}"#)
        let unknown = try await client.waitFor { $0.topic == "smarthome/bridge/response/room/explode" }
        #expect(Self.object(unknown.text)["transaction"] as? String == "t4")
        #expect(Self.error(Self.object(unknown.text)).hasPrefix("unknown action \"room/explode\""))
        let stranger = try await Self.ask(client, "room/add", #"{"user":"9","name":"Shed","transaction":"t5"}"#,
                                          transaction: "t5")
        #expect(stranger["status"] as? String == "error")
        #expect(Self.error(stranger) == "unknown user \"9\"")
        let invalid = try await Self.ask(client, "room/add",
                                         #"{"user":"1","name":"Lab","sensors":["Nope"],"transaction":"t6"}"#, transaction: "t6")
        let problems = Self.data(invalid)["problems"] as? [[String: Any]] ?? []
        #expect(problems.first?["path"] as? String == "sensors[0]", "\(invalid)")
        let fileRoom = try await Self.ask(client, "room/rename",
                                          #"{"user":"1","room":"kitchen","name":"Cookery","transaction":"t7"}"#, transaction: "t7")
        #expect(Self.error(fileRoom).contains("bridge.yaml"), "\(fileRoom)")
        let noRoom = try await Self.ask(client, "room/remove", #"{"user":"1","transaction":"t8"}"#, transaction: "t8")
        #expect(Self.error(noRoom) == "field \"room\" is required (the room's id or name)")

        let health = try await Self.ask(client, "health_check", #"{"transaction":"t9"}"#, transaction: "t9")
        #expect(Self.data(health)["healthy"] as? Bool == true, "\(health)")

        let removed = try await Self.ask(client, "room/remove", #"{"user":"1","room":"study","transaction":"t10"}"#,
                                         transaction: "t10")
        #expect(removed["status"] as? String == "ok", "\(removed)")
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/1/Study").status == 404)
    }

    /// The embedded broker's `local` account (README, "Try it") may send requests and read the answers.
    @Test(.enabled(if: TestBrokerKind.current == .mosquitto))
    func theEmbeddedBrokersLocalAccountMaySendRequests() async throws {
        let bridge = try await BridgeProcess(broker: nil)
        let line = try #require(bridge.log.split(separator: "\n").first { $0.contains("listening=mqtt://127.0.0.1:") })
        let port = try #require(line.firstMatch(of: /listening=mqtt:\/\/127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) })
        let passwordFile = try #require(line.firstMatch(of: /password_file=(\S+)/).map { String($0.1) })
        let password = try String(contentsOfFile: passwordFile, encoding: .utf8).trimmingCharacters(in: .newlines)
        let local = try await TestSubscriber(broker: port, subscribe: ["smarthome/bridge/response/#"], name: "local",
                                             username: "local", password: password)
        let health = try await Self.ask(local, "health_check", #"{"transaction":"e1"}"#, transaction: "e1")
        #expect(health["status"] as? String == "ok", "\(health)")
    }

    /// The demo config with Cemalettin an admin.
    static func adminConfig() throws -> String {
        let demo = try String(contentsOf: TestFiles.repositoryRoot.appendingPathComponent("config/bridge.yaml"),
                              encoding: .utf8)
        let path = try TestFiles.makeDirectory("admin-acl").appendingPathComponent("bridge.yaml").path
        try demo.replacingOccurrences(of: "    username: Cemalettin\n", with: "    username: Cemalettin\n    admin: true\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(.enabled(if: TestBrokerKind.current == .mosquitto))
    func onlyTheBridgesAccountAndAdminsMayPublishRequests() async throws {
        let files = try AccessFiles.make(config: try Self.adminConfig())
        let acl = try String(contentsOfFile: files.aclFile, encoding: .utf8)
        #expect(acl.contains("user Cemalettin\ntopic read smarthome/1/#"))
        #expect(acl.contains("topic write smarthome/bridge/request/#"))
        let broker = try await SecuredBroker(files: files)
        let bridge = try await BridgeProcess(broker: nil, environment: files.bridgeEnvironment(url: broker.url))
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 200))
        let observer = try AccountClient(port: broker.port, username: files.bridgeUsername, password: files.bridgePassword,
                                         subscribe: ["smarthome/bridge/response/#", "smarthome/2/kitchen/lights"])
        #expect(await observer.firstOutcome() == "connected")
        let kitchen = try await observer.waitFor { $0.topic == "smarthome/2/kitchen/lights" && $0.retain }
        let mehmet = try AccountClient(port: broker.port, username: "Mehmet", password: BrokerAccessTests.mehmetPassword,
                                       subscribe: ["smarthome/bridge/response/#"])
        #expect(await mehmet.firstOutcome() == "connected")
        let cemalettin = try AccountClient(port: broker.port, username: "Cemalettin",
                                           password: BrokerAccessTests.cemalettinPassword,
                                           subscribe: ["smarthome/bridge/response/#"])
        #expect(await cemalettin.firstOutcome() == "connected")

        // Mehmet is no admin: his request never reaches the bridge. His own light command after it
        // is the barrier (the broker handles one client's publishes in order).
        let flipped = kitchen.text == "ON" ? "OFF" : "ON"
        try mehmet.publish("smarthome/bridge/request/room/add", #"{"user":"2","name":"Hideout","transaction":"m1"}"#)
        try mehmet.publish("smarthome/2/kitchen/lights/set", "TOGGLE")
        try await observer.waitFor { $0.topic == "smarthome/2/kitchen/lights" && $0.text == flipped }
        try await Task.sleep(for: .milliseconds(500))
        #expect(observer.messages.filter { $0.topic.hasPrefix("smarthome/bridge/response/") }.isEmpty)
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/2/Hideout").status == 404)

        // Cemalettin is: he asks, and reads the answer; Mehmet cannot read it.
        try cemalettin.publish("smarthome/bridge/request/room/add", #"{"user":"1","name":"Office","transaction":"c1"}"#)
        let answer = try await cemalettin.waitFor { $0.topic == "smarthome/bridge/response/room/add" }
        #expect(Self.object(answer.text)["status"] as? String == "ok", "\(answer.text)")
        #expect(Self.object(answer.text)["transaction"] as? String == "c1")
        try await observer.waitFor { $0.topic == "smarthome/bridge/response/room/add" }
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/1/Office").status == 200)
        try await Task.sleep(for: .milliseconds(300))
        #expect(mehmet.messages.isEmpty, "a user who is no admin reads no answers")
    }
}
