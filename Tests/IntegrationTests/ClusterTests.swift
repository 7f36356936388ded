import BridgeCore
import BridgeMQTT
import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Several bridge instances on one real mosquitto (docs/scaling.md): each user owned by exactly one
/// instance, every instance answering HTTP for every user, commands relayed to the owner, and an
/// instance's death visible on its rooms' availability only.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct ClusterTests {
    static let instances = 3
    static let generatedUsers = 200
    static let secret = "cluster-test-secret-0123456789-abcdefghij"

    /// 200 users beside the demo's two, two rooms each, all with the demo password 12345 (the
    /// hash is Cemalettin's, so the config costs no hashing).
    static let extraUsers: String = (1...generatedUsers).map { number in
        let id = String(format: "u%03d", number)
        return """
              - id: "\(id)"
                username: user\(id)
                password_hash: "$argon2id$v=19$m=65536,t=2,p=1$AFwYLl14V6VLFBq3mN1oNA$z0YImiO0MUlUwjAJcNkvPZsytpsLsNbqpDuYtqrpMOU"
                rooms: [Kitchen, Bedroom]

            """
    }.joined()

    static let userIDs = ["1", "2"] + (1...generatedUsers).map { String(format: "u%03d", $0) }
    static let membership = ClusterMembership(instances: instances, index: 0)

    /// Starts instance `index`. The source ticks once an hour, so each reading is published once
    /// per connection: a second publisher of any topic would show as a second message.
    static func start(_ index: Int, broker: TestBroker, storagePath: String? = nil, discovery: Bool = false,
                      extraUsers: String = extraUsers) async throws -> BridgeProcess {
        try await BridgeProcess(
            broker: broker,
            settings: "http:\n  legacy_routes: true\nsource:\n  interval: 3600\n  seed: \(index + 1)\n",
            extraUsers: extraUsers, storagePath: storagePath,
            environment: ["SMARTHOME_CLUSTER_INSTANCES": String(instances),
                          "SMARTHOME_CLUSTER_INDEX": String(index),
                          "SMARTHOME_CLUSTER_SECRET": secret,
                          "SMARTHOME_CLUSTER_COMMAND_TIMEOUT": "2",
                          "SMARTHOME_HOMEASSISTANT_DISCOVERY": discovery ? "true" : "false"]
        )
    }

    static func json(_ reply: HTTP.Reply) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
    }

    /// Asks `read` every 0.1 s, up to 5 s, until `done` holds; returns the last answer.
    static func poll<T>(until done: (T) -> Bool, _ read: () async throws -> T) async throws -> T {
        var value = try await read()
        for _ in 0..<50 where !done(value) {
            try await Task.sleep(for: .milliseconds(100))
            value = try await read()
        }
        return value
    }

    static func isSensorTopic(_ topic: String) -> Bool {
        guard let sensor = Topics(base: "smarthome").parseSensorTopic(topic)?.sensor else { return false }
        return sensor != "availability"
    }

    @Test func usersArePartitionedAndEveryInstanceServesEveryone() async throws {
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/#"], name: "watcher")
        var bridges: [BridgeProcess] = []
        for index in 0..<Self.instances { bridges.append(try await Self.start(index, broker: broker)) }
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }

        // Demo users: 16 rooms × 4 sensors; generated: 200 × 2 rooms × 4 sensors.
        let expectedTopics = 16 * 4 + Self.generatedUsers * 2 * 4
        #expect(await eventually(timeout: 20) {
            Set(watcher.messages.map(\.topic).filter(Self.isSensorTopic)).count >= expectedTopics
        })
        try await Task.sleep(for: .seconds(1))
        var publications: [String: Int] = [:]
        for message in watcher.messages where Self.isSensorTopic(message.topic) {
            publications[message.topic, default: 0] += 1
        }
        #expect(publications.count == expectedTopics)
        let duplicated = publications.filter { $0.value != 1 }
        #expect(duplicated.isEmpty, "published more than once (by more than one instance): \(duplicated.prefix(5))")

        // Each instance owns a share; the shares add up to everyone.
        var owned = 0
        for (index, bridge) in bridges.enumerated() {
            let expected = Self.userIDs.filter { Self.membership.owner(of: $0) == index }.count
            #expect(expected > 0)
            #expect(bridge.log.contains("owned_users=\(expected)"), "instance \(index) log:\n\(bridge.log.prefix(2000))")
            owned += expected
        }
        #expect(owned == Self.userIDs.count)

        // Every seed route, on every instance, for every user: the same answer everywhere, and the
        // values the owners published.
        for user in Self.userIDs {
            var roomsAnswers: Set<String> = []
            for bridge in bridges {
                let reply = try await HTTP.get(bridge.httpPort, "/rooms/\(user)")
                #expect(reply.status == 200, "instance \(bridge.httpPort) /rooms/\(user): \(reply.status)")
                roomsAnswers.insert(reply.text)
            }
            #expect(roomsAnswers.count == 1, "/rooms/\(user) differs between instances: \(roomsAnswers)")
            let rooms = user.hasPrefix("u") ? ["kitchen", "bedroom"] : []
            for room in rooms {
                var answers: Set<String> = []
                for bridge in bridges {
                    let reply = try await HTTP.get(bridge.httpPort, "/rooms/\(user)/\(room)")
                    #expect(reply.status == 200)
                    answers.insert(reply.text)
                }
                #expect(answers.count == 1, "/rooms/\(user)/\(room) differs between instances: \(answers)")
                let published = watcher.last("smarthome/\(user)/\(room)/temperature")
                let values = Self.json(try await HTTP.get(bridges[0].httpPort, "/rooms/\(user)/\(room)"))?["SensorValues"]
                #expect((values as? [String])?.first == published, "\(user)/\(room)")
            }
        }
        for bridge in bridges {
            for room in ["livingroom", "kitchen", "balcony"] {
                for user in ["1", "2"] {
                    let reply = try await HTTP.get(bridge.httpPort, "/rooms/\(user)/\(room)")
                    #expect(reply.status == 200)
                    let values = Self.json(reply)?["SensorValues"] as? [String]
                    #expect(values?.first == watcher.last("smarthome/\(user)/\(room)/temperature"))
                }
            }
        }

        // The API: a token from any instance works on every instance (shared cluster.secret).
        for user in ["1", "u001", "u002", "u003", "u150"] {
            let username = user == "1" ? "Cemalettin" : "user\(user)"
            for (loginIndex, loginBridge) in bridges.enumerated() {
                let token = try await APITests.token(loginBridge.httpPort, username, "12345")
                for (index, bridge) in bridges.enumerated() {
                    let rooms = try await HTTP.send(bridge.httpPort, "/api/v1/rooms", method: "GET", token: token)
                    #expect(rooms.status == 200, "token from \(loginIndex) on \(index): \(rooms.status)")
                    let kitchen = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen", method: "GET",
                                                      token: token)
                    #expect(kitchen.status == 200)
                    #expect(Self.json(kitchen)?["UpdatedAt"] is String)
                }
            }
            let legacy = try await HTTP.get(bridges[2].httpPort, "/login/\(username)/12345")
            #expect(Self.json(legacy)?["userID"] as? String == user)
        }

        // Logging out on one instance ends the token on all of them.
        let token = try await APITests.token(bridges[1].httpPort, "Mehmet", "123456")
        for bridge in bridges {
            #expect(try await HTTP.send(bridge.httpPort, "/api/v1/rooms", method: "GET", token: token).status == 200)
        }
        #expect(try await HTTP.send(bridges[1].httpPort, "/api/v1/logout", method: "POST", token: token).status == 204)
        for (index, bridge) in bridges.enumerated() {
            let status = try await Self.poll(until: { $0 == 401 }) {
                try await HTTP.send(bridge.httpPort, "/api/v1/rooms", method: "GET", token: token).status
            }
            #expect(status == 401, "instance \(index) still takes a token logged out on instance 1")
        }
    }

    @Test func aLightCommandOnAnyInstanceIsAppliedOnceByTheOwner() async throws {
        let broker = try await TestBroker()
        var bridges: [BridgeProcess] = []
        for index in 0..<Self.instances { bridges.append(try await Self.start(index, broker: broker)) }
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        let user = try #require(Self.userIDs.first { Self.membership.owner(of: $0) == 2 && $0.hasPrefix("u") })
        // Exact topics: RabbitMQ gives retained messages only to exact subscriptions.
        let watcher = try await TestSubscriber(
            broker: broker, subscribe: ["smarthome/\(user)/kitchen/lights", "smarthome/\(user)/kitchen/lights/set"],
            name: "watcher")
        try await watcher.waitFor("smarthome/\(user)/kitchen/lights", payload: "OFF")
        watcher.clear()

        let token = try await APITests.token(bridges[0].httpPort, "user\(user)", "12345")
        // A live event stream on an instance that does not own the user sees the change too.
        let stream = try EventStreamTests.EventStreamClient(port: bridges[1].httpPort, token: token)
        #expect(stream.waitFor("retry: 3000"))
        let reply = try await HTTP.send(bridges[0].httpPort, "/api/v1/rooms/kitchen/lights", method: "POST",
                                        body: Data(#"{"state":"TOGGLE"}"#.utf8), token: token)
        #expect(reply.status == 200, "\(reply.text)")
        let names = Self.json(reply)?["SensorNames"] as? [String] ?? []
        let values = Self.json(reply)?["SensorValues"] as? [String] ?? []
        #expect(names.firstIndex(of: "Lights").map { values[$0] } == "On", "the answer shows the confirmed state")

        try await Task.sleep(for: .seconds(1))
        let commands = watcher.messages.filter { $0.topic.hasSuffix("/lights/set") }
        let states = watcher.messages.filter { $0.topic == "smarthome/\(user)/kitchen/lights" }
        #expect(commands.map(\.text) == ["ON"], "relayed once, as an explicit ON (a TOGGLE could be redelivered)")
        #expect(states.map(\.text) == ["ON"], "applied once")
        #expect(bridges[2].log.contains("light switched"), "the owner applied it")
        #expect(stream.waitFor(#""room":"kitchen","sensor":"lights","value":"ON""#), "\(stream.text.suffix(300))")
        #expect(!bridges[0].log.contains("light switched") && !bridges[1].log.contains("light switched"))
        // Every instance now serves the new state.
        for bridge in bridges {
            let room = Self.json(try await HTTP.get(bridge.httpPort, "/rooms/\(user)/kitchen"))
            #expect((room?["SensorValues"] as? [String])?.contains("On") == true)
        }

        // The history comes from the owner's database, whichever instance is asked.
        for bridge in bridges {
            let history = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=lights",
                                              method: "GET", token: token)
            #expect(history.status == 200, "\(history.text)")
            let points = Self.json(history)?["points"] as? [[String: String]] ?? []
            #expect(points.last?["v"] == "ON", "instance \(bridge.httpPort): \(history.text)")
        }

        // The owner gone: the answer is a bounded 504 with the error shape, not a hang.
        bridges[2].signal(SIGKILL)
        _ = bridges[2].waitForExit(timeout: 5)
        let timedOut = try await HTTP.send(bridges[0].httpPort, "/api/v1/rooms/kitchen/lights", method: "POST",
                                           body: Data(#"{"state":"OFF"}"#.utf8), token: token)
        #expect(timedOut.status == 504)
        #expect(((Self.json(timedOut)?["error"] as? [String: Any])?["message"] as? String)?.contains("did not confirm")
            == true, "\(timedOut.text)")
        let noHistory = try await HTTP.send(bridges[0].httpPort, "/api/v1/rooms/kitchen/history?sensor=lights",
                                            method: "GET", token: token)
        #expect(noHistory.status == 504, "\(noHistory.text)")
    }

    /// Every instance on one broker, and a generated user instance 2 owns, logged in on instance 0.
    static func startAll(_ broker: TestBroker) async throws -> (bridges: [BridgeProcess], user: String, token: String) {
        var bridges: [BridgeProcess] = []
        for index in 0..<instances { bridges.append(try await start(index, broker: broker)) }
        let user = try #require(userIDs.first { membership.owner(of: $0) == 2 && $0.hasPrefix("u") })
        return (bridges, user, try await APITests.token(bridges[0].httpPort, "user\(user)", "12345"))
    }

    /// `GET /api/v1/<kind>` on one instance: the `<kind>` list.
    static func list(_ kind: String, on bridge: BridgeProcess, token: String) async throws -> [[String: Any]] {
        let reply = try await HTTP.send(bridge.httpPort, "/api/v1/\(kind)", method: "GET", token: token)
        return json(reply)?[kind] as? [[String: Any]] ?? []
    }

    /// Posts `body` to `/api/v1/<kind>` on instance 0 and waits until every instance lists it; its uuid.
    static func createEverywhere(_ kind: String, _ body: String, title: String, bridges: [BridgeProcess],
                                 token: String) async throws -> String {
        let created = try await HTTP.send(bridges[0].httpPort, "/api/v1/\(kind)", method: "POST", body: Data(body.utf8),
                                          token: token)
        #expect(created.status == 201, "\(created.text)")
        let uuid = try #require(json(created)?["uuid"] as? String)
        for (index, bridge) in bridges.enumerated() {
            let found = try await poll(until: { !$0.isEmpty }) {
                try await list(kind, on: bridge, token: token).filter { $0["uuid"] as? String == uuid }
            }
            #expect(found.first?["title"] as? String == title, "instance \(index) does not list the new one of \(kind)")
        }
        return uuid
    }

    /// Deletes one of `kind` on instance 1 and waits until no instance lists it.
    static func deleteEverywhere(_ kind: String, _ uuid: String, bridges: [BridgeProcess], token: String) async throws {
        let deleted = try await HTTP.send(bridges[1].httpPort, "/api/v1/\(kind)/\(uuid)", method: "DELETE", token: token)
        #expect(deleted.status == 204)
        for (index, bridge) in bridges.enumerated() {
            let remaining = try await poll(until: { $0 == 0 }) {
                try await list(kind, on: bridge, token: token).filter { $0["uuid"] as? String == uuid }.count
            }
            #expect(remaining == 0, "instance \(index) still lists a deleted one of \(kind)")
        }
    }

    @Test func alarmsAreOnEveryInstanceAndFireOnceOnTheOwner() async throws {
        let broker = try await TestBroker()
        let (bridges, user, token) = try await Self.startAll(broker)
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(user)/#"], name: "watcher")
        let list = { (bridge: BridgeProcess) in try await Self.list("alarms", on: bridge, token: token) }

        // Created on instance 0, for a user instance 2 owns, due in a few seconds.
        let due = Date.ISO8601FormatStyle().format(Date().addingTimeInterval(4))
        let body = #"{"title":"Lights on","fireDate":"\#(due)","repeats":"never","action":{"room":"kitchen","lights":"ON"}}"#
        let uuid = try await Self.createEverywhere("alarms", body, title: "Lights on", bridges: bridges, token: token)

        // It fires once, on the owner, and its action switches the light once.
        try await watcher.waitFor(timeout: 15) { $0.topic == "smarthome/\(user)/events" && $0.text.contains(uuid) }
        try await watcher.waitFor("smarthome/\(user)/kitchen/lights", payload: "ON")
        try await Task.sleep(for: .seconds(2))
        #expect(watcher.messages.filter { $0.topic == "smarthome/\(user)/events" && $0.text.contains(uuid) }.count == 1)
        #expect(watcher.messages.filter { $0.topic == "smarthome/\(user)/kitchen/lights" && $0.text == "ON" }.count == 1)
        #expect(bridges[2].log.contains("alarm fired"))
        #expect(!bridges[0].log.contains("alarm fired") && !bridges[1].log.contains("alarm fired"))
        // The one-shot is now off everywhere.
        for bridge in bridges {
            let alarm = try await list(bridge).first { $0["uuid"] as? String == uuid }
            #expect(alarm?["isEnabled"] as? Bool == false)
        }

        // Deleted on instance 1: gone from every instance.
        try await Self.deleteEverywhere("alarms", uuid, bridges: bridges, token: token)
    }

    @Test func watchdogsAreOnEveryInstanceAndFireOnceOnTheOwner() async throws {
        let broker = try await TestBroker()
        let (bridges, user, token) = try await Self.startAll(broker)
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(user)/events"], name: "watcher")

        // Created on instance 0 for a user instance 2 owns: lights change only by command, so it fires.
        let body = #"{"title":"Kitchen lights","room":"kitchen","sensor":"lights","condition":"unchanged","for":"2s"}"#
        let uuid = try await Self.createEverywhere("watchdogs", body, title: "Kitchen lights", bridges: bridges, token: token)
        try await watcher.waitFor(timeout: 15) { $0.text.contains(#""type":"watchdog""#) && $0.text.contains(uuid) }
        try await Task.sleep(for: .seconds(2))
        #expect(watcher.messages.filter { $0.text.contains(uuid) }.count == 1, "fired more than once")
        #expect(bridges[2].log.contains("watchdog fired"))
        #expect(!bridges[0].log.contains("watchdog fired") && !bridges[1].log.contains("watchdog fired"))

        // Deleted on instance 1: gone from every instance.
        try await Self.deleteEverywhere("watchdogs", uuid, bridges: bridges, token: token)
    }

    @Test func eachRoomIsAnnouncedToHomeAssistantByItsOwnerOnly() async throws {
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["homeassistant/#"], name: "watcher")
        // 20 generated users keep this under mosquitto's 1,000 queued messages for the watcher.
        let users = Self.extraUsers.components(separatedBy: "  - id:").prefix(21).joined(separator: "  - id:")
        var bridges: [BridgeProcess] = []
        for index in 0..<Self.instances {
            bridges.append(try await Self.start(index, broker: broker, discovery: true, extraUsers: users))
        }
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        // Demo: 16 rooms × 4 sensors; generated: 20 × 2 rooms × 4 sensors; each of the 22 users'
        // every-light light and 3 event entities; plus the bridge's own.
        let expected = 16 * 4 + 20 * 2 * 4 + 22 * 4 + 1
        #expect(await eventually(timeout: 15) { Set(watcher.messages.map(\.topic)).count >= expected })
        // Past the stale-config sweep (2 s after each start): no instance clears another's configs.
        try await Task.sleep(for: .seconds(3))
        var configs: [String: Int] = [:]
        for message in watcher.messages where message.topic.hasSuffix("/config") {
            #expect(!message.payload.isEmpty, "an instance cleared \(message.topic)")
            configs[message.topic, default: 0] += 1
        }
        #expect(configs.count == expected)
        let bridgeDevice = configs.keys.filter { $0.contains("_bridge/") }
        #expect(bridgeDevice.count == 1)
        let repeated = configs.filter { $0.value != 1 && !bridgeDevice.contains($0.key) }
        #expect(repeated.isEmpty, "announced by more than one instance: \(repeated.prefix(3))")
        // Each entity depends on its room's availability too, which the owner's death turns off.
        let kitchen = try #require(watcher.messages.first { $0.topic == "homeassistant/sensor/smarthome_u001_kitchen/temperature/config" })
        #expect(kitchen.text.contains("smarthome/u001/kitchen/availability"), "\(kitchen.text)")
    }

    @Test func aKilledInstanceTakesOnlyItsOwnRoomsOffline() async throws {
        let broker = try await TestBroker()
        var bridges: [BridgeProcess] = []
        let storage = try TestFiles.makeDirectory("cluster-storage")
        for index in 0..<Self.instances {
            bridges.append(try await Self.start(index, broker: broker,
                                                storagePath: storage.appendingPathComponent("\(index).sqlite").path))
        }
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        // Exact topics (RabbitMQ gives retained messages only to those), few enough for mosquitto's
        // 1,000 queued messages per client.
        let watcher = try await TestSubscriber(
            broker: broker,
            subscribe: Self.userIDs.map { "smarthome/\($0)/kitchen/availability" }
                + ["smarthome/bridge/state", "smarthome/bridge/1/state"],
            name: "watcher")
        let ownedBy1 = Self.userIDs.filter { Self.membership.owner(of: $0) == 1 }
        let others = Self.userIDs.filter { Self.membership.owner(of: $0) != 1 }
        let availability = { (user: String) in "smarthome/\(user)/kitchen/availability" }
        #expect(await eventually(timeout: 10) { Self.userIDs.allSatisfy { watcher.last(availability($0)) == "online" } })
        try await watcher.waitFor("smarthome/bridge/1/state", payload: "online")

        bridges[1].signal(SIGKILL)
        _ = bridges[1].waitForExit(timeout: 5)
        try await watcher.waitFor("smarthome/bridge/1/state", payload: "offline", timeout: 60)
        #expect(await eventually(timeout: 10) {
            ownedBy1.allSatisfy { watcher.last(availability($0)) == "offline" }
        }, "every room of the killed instance's users is unavailable")
        let notOnline = others.filter { watcher.last(availability($0)) != "online" }
        #expect(notOnline.isEmpty, "the others' rooms are untouched: \(notOnline.map { ($0, watcher.last(availability($0))) })")
        #expect(await eventually(timeout: 10) { watcher.last("smarthome/bridge/state") == "online" },
                "the cluster is still online")

        bridges[1] = try await Self.start(1, broker: broker, storagePath: storage.appendingPathComponent("1.sqlite").path)
        #expect(await eventually(timeout: 15) {
            ownedBy1.allSatisfy { watcher.last(availability($0)) == "online" }
        }, "restarted, its rooms are back")
        #expect(watcher.last("smarthome/bridge/1/state") == "online")

        // The last instance to die leaves the cluster offline.
        for bridge in bridges { bridge.signal(SIGKILL); _ = bridge.waitForExit(timeout: 5) }
        #expect(await eventually(timeout: 60) { watcher.last("smarthome/bridge/state") == "offline" })
    }
}
