import BridgeCore
import BridgeStorage
import Foundation
import PostgresTestSupport
import Testing

/// Three instances on one mosquitto sharing one real PostgreSQL (docs/scaling.md, "Shared
/// PostgreSQL"): history, alarms and logouts are read and written in the database, nothing of them
/// travels over MQTT, and an alarm still fires once, on its user's owner.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PostgresClusterTests {
    /// Instance `index` of three on `url`; readings every half second so history is recorded.
    static func start(_ index: Int, broker: TestBroker, url: String, lease: String = "10s") async throws -> BridgeProcess {
        try await BridgeProcess(
            broker: broker, settings: "source:\n  interval: 0.5\n  seed: \(index + 1)\n",
            extraUsers: ClusterTests.extraUsers,
            environment: ["SMARTHOME_CLUSTER_INSTANCES": String(ClusterTests.instances),
                          "SMARTHOME_CLUSTER_INDEX": String(index),
                          "SMARTHOME_CLUSTER_SECRET": ClusterTests.secret,
                          "SMARTHOME_CLUSTER_COMMAND_TIMEOUT": "2",
                          "SMARTHOME_HOMEASSISTANT_DISCOVERY": "false",
                          "SMARTHOME_CLUSTER_LEASE": lease,
                          "SMARTHOME_STORAGE_URL": url])
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

        // History recorded by the owner (instance 2) is read from the database by every instance.
        try await Task.sleep(for: .seconds(2.5))
        for (index, bridge) in bridges.enumerated() {
            let reply = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature",
                                            method: "GET", token: token)
            #expect(reply.status == 200, "instance \(index): \(reply.text)")
            let points = ClusterTests.json(reply)?["points"] as? [[String: String]] ?? []
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
        for index in 0..<ClusterTests.instances {
            bridges.append(try await Self.start(index, broker: broker, url: url, lease: "3s"))
        }
        let user = try #require(ClusterTests.userIDs.first { ClusterTests.membership.owner(of: $0) == 2 && $0.hasPrefix("u") })
        let token = try await APITests.token(bridges[0].httpPort, "user\(user)", "12345")
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/\(user)/events"], name: "events")
        let database = try Database(url: try StorageURL.parse(url).get())
        let holder = { () throws -> Int64? in
            try database.query("SELECT instance FROM user_leases WHERE user_id = ? AND expires_at > ?",
                               [.text(user), .real(Date().timeIntervalSince1970)]).first?.first?.integer
        }
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
        var back: Int64?
        for _ in 0..<100 where back != 2 {
            try await Task.sleep(for: .milliseconds(100))
            back = try holder()
        }
        #expect(back == 2, "rebalanced to the hash owner")
        #expect(bridges[Int(taker)].log.contains("handed_back="))
    }
}
