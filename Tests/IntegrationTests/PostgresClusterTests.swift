import BridgeCore
import BridgeMQTT
import BridgeStorage
import Foundation
import PostgresTestSupport
import Testing

/// Three instances on one mosquitto sharing one real PostgreSQL (docs/scaling.md, "Shared
/// PostgreSQL"): history, alarms and logouts are read and written in the database, nothing of them
/// travels over MQTT, and an alarm still fires once, on its user's owner.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PostgresClusterTests {
    /// Instance `index` of three on `url`; readings every half second (or `interval`) so history is recorded.
    static func start(_ index: Int, broker: TestBroker, url: String, lease: String = "10s",
                      interval: Double = 0.5) async throws -> BridgeProcess {
        try await BridgeProcess(
            broker: broker, settings: "source:\n  interval: \(interval)\n  seed: \(index + 1)\n",
            extraUsers: ClusterTests.extraUsers,
            environment: ["SMARTHOME_CLUSTER_INSTANCES": String(ClusterTests.instances),
                          "SMARTHOME_CLUSTER_INDEX": String(index),
                          "SMARTHOME_CLUSTER_SECRET": ClusterTests.secret,
                          "SMARTHOME_CLUSTER_COMMAND_TIMEOUT": "2",
                          "SMARTHOME_HOMEASSISTANT_DISCOVERY": "false",
                          "SMARTHOME_CLUSTER_LEASE": lease,
                          "SMARTHOME_STORAGE_URL": url])
    }

    /// Every instance, started one after the other.
    static func startAll(broker: TestBroker, url: String, lease: String,
                         interval: Double = 0.5) async throws -> [BridgeProcess] {
        var bridges: [BridgeProcess] = []
        for index in 0..<ClusterTests.instances {
            bridges.append(try await start(index, broker: broker, url: url, lease: lease, interval: interval))
        }
        return bridges
    }

    /// Runs `body` with a fresh database, a broker and every instance started; stops them after.
    static func withCluster(lease: String,
                            _ body: (TestBroker, String, inout [BridgeProcess]) async throws -> Void) async throws {
        let server = try TestPostgres.shared()
        let url = server.url(database: try server.freshDatabase())
        let broker = try await TestBroker()
        var bridges: [BridgeProcess] = []
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        bridges = try await startAll(broker: broker, url: url, lease: lease)
        try await body(broker, url, &bridges)
    }

    /// A user of the demo's owned by instance 2 by hash.
    static let userOfInstance2 = ClusterTests.userIDs.first { ClusterTests.membership.owner(of: $0) == 2 && $0.hasPrefix("u") }

    /// Who holds `user`'s lease now, read from the database at `url`.
    static func leaseHolder(of user: String, url: String) throws -> () throws -> Int64? {
        let database = try Database(url: try StorageURL.parse(url).get())
        return {
            try database.query("SELECT instance FROM user_leases WHERE user_id = ? AND expires_at > ?",
                               [.text(user), .real(Date().timeIntervalSince1970)]).first?.first?.integer
        }
    }

    /// Asks `holder` every 0.1 s, up to 15 s, until `instance` holds the lease; returns the last answer.
    static func waitUntilHeld(by instance: Int64, _ holder: () throws -> Int64?) async throws -> Int64? {
        var current = try holder()
        for _ in 0..<150 where current != instance {
            try await Task.sleep(for: .milliseconds(100))
            current = try holder()
        }
        return current
    }

    @Test func historyAlarmsAndLogoutsAreSharedThroughTheDatabase() async throws {
        let server = try TestPostgres.shared()
        let url = server.url(database: try server.freshDatabase())
        let broker = try await TestBroker()
        let replicated = try await TestSubscriber(broker: broker, subscribe: [
            "smarthome/bridge/alarms/#", "smarthome/bridge/watchdogs/#", "smarthome/bridge/revoked/#",
            "smarthome/bridge/+/history/#",
        ], name: "replication-watcher")
        var bridges: [BridgeProcess] = []
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        for index in 0..<ClusterTests.instances { bridges.append(try await Self.start(index, broker: broker, url: url)) }
        let user = try #require(ClusterTests.userIDs.first { ClusterTests.membership.owner(of: $0) == 2 && $0.hasPrefix("u") })
        let token = try await APITests.token(bridges[0].httpPort, "user\(user)", "12345")
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(user)/events"], name: "events")
        // History recorded by the owner (instance 2, once the first lease rounds settled) is read from
        // the database by every instance.
        for (index, bridge) in bridges.enumerated() {
            let points = try await ClusterTests.poll(until: { $0.count >= 2 }) { () async throws -> [[String: String]] in
                try await Task.sleep(for: .milliseconds(400))
                let reply = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature",
                                                method: "GET", token: token)
                #expect(reply.status == 200, "instance \(index): \(reply.text)")
                return ClusterTests.json(reply)?["points"] as? [[String: String]] ?? []
            }
            #expect(points.count >= 2, "instance \(index) reads the owner's history")
        }

        // An alarm created on instance 0 is listed at once by every instance and fires once, on the owner.
        let due = Date.ISO8601FormatStyle().format(Date().addingTimeInterval(3))
        let created = try await HTTP.send(bridges[0].httpPort, "/api/v1/alarms", method: "POST", body: Data(
            #"{"title":"Lights on","fireDate":"\#(due)","repeats":"never"}"#.utf8), token: token)
        #expect(created.status == 201, "\(created.text)")
        let uuid = try #require(ClusterTests.json(created)?["uuid"] as? String)
        for bridge in bridges {
            #expect(try await ClusterTests.list("alarms", on: bridge, token: token).map { $0["uuid"] as? String } == [uuid])
        }
        try await watcher.waitFor(timeout: 15) { $0.text.contains(uuid) }
        try await Task.sleep(for: .seconds(2))
        #expect(watcher.messages.filter { $0.text.contains(uuid) }.count == 1)
        #expect(bridges[2].log.contains("alarm fired"))
        #expect(!bridges[0].log.contains("alarm fired") && !bridges[1].log.contains("alarm fired"))
        for bridge in bridges {
            let alarm = try await ClusterTests.list("alarms", on: bridge, token: token).first
            #expect(alarm?["isEnabled"] as? Bool == false, "the one-shot is off for every instance")
        }

        // A logout on instance 1 is refused by every instance at once.
        #expect(try await HTTP.send(bridges[1].httpPort, "/api/v1/logout", method: "POST", token: token).status == 204)
        for (index, bridge) in bridges.enumerated() {
            let reply = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "GET", token: token)
            #expect(reply.status == 401, "instance \(index) still takes a revoked token")
        }

        // None of it went over MQTT.
        #expect(replicated.messages.isEmpty, "\(replicated.messages.map(\.topic))")
    }

    /// Leases (docs/scaling.md): an instance killed with SIGKILL stops renewing; once its leases
    /// expire (3 s here) a live instance takes its users over, and an alarm of theirs due after
    /// that fires once, on the new holder. Restarted, it gets its share back.
    @Test func aKilledInstancesAlarmsFireOnceOnTheInstanceThatTakesItsLeases() async throws {
        let server = try TestPostgres.shared()
        let url = server.url(database: try server.freshDatabase())
        let broker = try await TestBroker()
        var bridges: [BridgeProcess] = []
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        bridges = try await Self.startAll(broker: broker, url: url, lease: "3s")
        let user = try #require(Self.userOfInstance2)
        let token = try await APITests.token(bridges[0].httpPort, "user\(user)", "12345")
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(user)/events"], name: "events")
        let holder = try Self.leaseHolder(of: user, url: url)
        #expect(try await ClusterTests.poll(until: { $0 == 2 }) { try holder() } == 2, "the hash owner holds the lease")

        let due = Date().addingTimeInterval(7)
        let created = try await HTTP.send(bridges[0].httpPort, "/api/v1/alarms", method: "POST", body: Data(
            #"{"title":"After the takeover","fireDate":"\#(Date.ISO8601FormatStyle().format(due))","repeats":"never"}"#.utf8),
            token: token)
        #expect(created.status == 201, "\(created.text)")
        let uuid = try #require(ClusterTests.json(created)?["uuid"] as? String)
        bridges[2].signal(SIGKILL)
        _ = bridges[2].waitForExit(timeout: 5)

        // Within the lease and a round, instance 0 or 1 holds the user; the alarm fires there, once.
        try await watcher.waitFor(timeout: 20) { $0.text.contains(uuid) }
        let taker = try #require(try holder())
        #expect(taker == 0 || taker == 1)
        try await Task.sleep(for: .seconds(2))
        #expect(watcher.messages.filter { $0.text.contains(uuid) }.count == 1)
        #expect(bridges[Int(taker)].log.contains("alarm fired"))
        #expect(!bridges[1 - Int(taker)].log.contains("alarm fired"))

        // Restarted, instance 2 gets the user back (handed back by the interim holder first).
        bridges[2] = try await Self.start(2, broker: broker, url: url, lease: "3s")
        #expect(try await Self.waitUntilHeld(by: 2, holder) == 2, "rebalanced to the hash owner")
        #expect(bridges[Int(taker)].log.contains("handed_back="))

        // Killed again the moment it holds the user, before the others' next round has seen that:
        // its rooms are still announced `offline` for it (who held what is read from the database).
        let availability = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(user)/kitchen/availability"],
                                                    name: "availability")
        try await availability.waitFor("smarthome/\(user)/kitchen/availability")
        let seen = availability.messages.count
        bridges[2].signal(SIGKILL)
        _ = bridges[2].waitForExit(timeout: 5)
        _ = try? await availability.waitFor(timeout: 8) { _ in
            availability.messages.dropFirst(seen).contains { $0.text == "offline" }
        }
        #expect(availability.messages.dropFirst(seen).contains { $0.text == "offline" },
                "announced offline for the killed holder")
    }

    /// Leases (docs/scaling.md): a killed instance's rooms publish again from the instance that
    /// takes its user's lease, back `online`, and its light commands are applied there once;
    /// restarted, it gets the user back and only one instance publishes the user's readings.
    @Test func aKilledInstancesRoomsPublishAgainFromTheInstanceThatTakesItsLeases() async throws {
        try await Self.withCluster(lease: "3s") { broker, url, bridges in
            let user = try #require(Self.userOfInstance2)
            let holder = try Self.leaseHolder(of: user, url: url)
            #expect(try await ClusterTests.poll(until: { $0 == 2 }) { try holder() } == 2, "the hash owner holds the lease")
            let rooms = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(user)/kitchen/#"], name: "rooms")
            let temperature = "smarthome/\(user)/kitchen/temperature"
            let availability = "smarthome/\(user)/kitchen/availability"
            let lights = "smarthome/\(user)/kitchen/lights"
            try await rooms.waitFor(temperature)
            // Waits for a message after the first `after` ones.
            func next(after: Int, timeout: Double, _ predicate: @escaping (MQTTMessage) -> Bool) async throws {
                _ = try await rooms.waitFor(timeout: timeout) { _ in rooms.messages.dropFirst(after).contains(where: predicate) }
            }

            // The owner switches the light on before it dies: the taker keeps it on (the database's last value).
            let token = try await APITests.token(bridges[0].httpPort, "user\(user)", "12345")
            let switched = try await HTTP.send(bridges[2].httpPort, "/api/v1/rooms/kitchen/lights", method: "POST",
                                               body: Data(#"{"state":"ON"}"#.utf8), token: token)
            #expect(switched.status == 200, "\(switched.text)")
            try await Task.sleep(for: .seconds(1.5))

            bridges[2].signal(SIGKILL)
            _ = bridges[2].waitForExit(timeout: 5)
            let killed = rooms.messages.count
            // Within cluster.lease + 5 s: announced online again by the taker, and publishing, from instance 0 or 1.
            try await next(after: killed, timeout: 8) { $0.topic == availability && $0.text == "online" }
            let online = rooms.messages.count
            try await next(after: online, timeout: 3) { $0.topic == temperature }
            let taker = try #require(try holder())
            #expect(taker == 0 || taker == 1)
            #expect(bridges[Int(taker)].log.contains("cluster leases changed"))
            #expect(bridges[Int(taker)].log.contains("sources follow the leases"), "the taker's sources took the user")
            #expect(rooms.messages.dropFirst(killed).filter { $0.topic == lights }.map(\.text) == ["ON"],
                    "the taker announces the light as the owner left it")

            // A light command through the other live instance is relayed to the holder and applied once.
            let before = rooms.messages.count
            let other = 1 - Int(taker)
            let reply = try await HTTP.send(bridges[other].httpPort, "/api/v1/rooms/kitchen/lights", method: "POST",
                                            body: Data(#"{"state":"ON"}"#.utf8), token: token)
            #expect(reply.status == 200, "\(reply.text)")
            try await Task.sleep(for: .seconds(1))
            let applied = rooms.messages.dropFirst(before).filter { $0.topic == lights }
            #expect(applied.map(\.text) == ["ON"], "applied once")
            #expect(bridges[Int(taker)].log.contains("light switched"), "the holder applied it")
            #expect(!bridges[other].log.contains("light switched"))

            // Restarted, instance 2 gets the user back; then one instance publishes: readings come every
            // 0.5 s, so 4 s hold at most 9 temperature readings from one (about 16 from two).
            bridges[2] = try await Self.start(2, broker: broker, url: url, lease: "3s")
            #expect(try await Self.waitUntilHeld(by: 2, holder) == 2, "rebalanced to the hash owner")
            try await Task.sleep(for: .seconds(1))
            let settled = rooms.messages.count
            try await Task.sleep(for: .seconds(4))
            let readings = rooms.messages.dropFirst(settled).filter { $0.topic == temperature }
            #expect(!readings.isEmpty, "the returned owner publishes")
            #expect(readings.count <= 9, "\(readings.count) temperature readings in 4 s: two instances publish")
            #expect(rooms.messages.dropFirst(settled).filter { $0.topic == availability }.allSatisfy { $0.text == "online" })
        }
    }
}
