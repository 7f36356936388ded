import BridgeCore
import BridgeMQTT
import BridgeStorage
import Foundation
import PostgresTestSupport
import Testing

/// Failover at full size (docs/scaling.md, "Leases"): three instances on one mosquitto and one
/// PostgreSQL with the demo users and 200 generated ones (`ClusterTests.extraUsers`). One is
/// killed with SIGKILL; its homes come back on the others within `cluster.lease` + 5 s, and its
/// share comes back to it when it returns, with never two instances publishing one user.
///
/// Publishers are told apart in the broker's log (`BrokerPublishLog`): on MQTT 3.1.1 a subscriber
/// sees no sender, and a taker's retained re-announce looks like any reading; mosquitto logs the
/// client id of every PUBLISH it receives.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PostgresFailoverTests {
    static let lease = 3.0
    /// The instance killed: it owns the demo users (so their eight-room homes are among those taken
    /// over) and 67 generated ones.
    static let victim = 1
    static let demoRooms = ["livingroom", "bathroom", "bedroom", "kitchen", "garden", "saloon", "babyroom", "balcony"]

    static func rooms(of user: String) -> [String] {
        user.hasPrefix("u") ? ["kitchen", "bedroom"] : demoRooms
    }

    /// Every user → the instance holding its lease now, read from the database at `url`.
    static func holders(url: String) throws -> () throws -> [String: Int] {
        let database = try Database(url: try StorageURL.parse(url).get())
        return {
            var holders: [String: Int] = [:]
            for row in try database.query("SELECT user_id, instance FROM user_leases WHERE expires_at > ?",
                                          [.real(Date().timeIntervalSince1970)]) {
                if let user = row.first?.text, let instance = row.last?.integer { holders[user] = Int(instance) }
            }
            return holders
        }
    }

    /// The MQTT client id an instance logged when it connected.
    static func clientID(of bridge: BridgeProcess) throws -> String {
        let line = try #require(bridge.log.split(separator: "\n").first { $0.contains("connecting to broker") })
        let field = try #require(line.split(separator: " ").first { $0.hasPrefix("client_id=") })
        return String(field.dropFirst("client_id=".count))
    }

    /// Whether `run` is `turns` with some turns skipped.
    static func isInOrder(_ run: [Int], within turns: [Int]) -> Bool {
        var rest = turns[...]
        for publisher in run {
            guard let found = rest.firstIndex(of: publisher) else { return false }
            rest = rest[(found + 1)...]
        }
        return true
    }

    /// A few entries of `found`, readable in a failure message.
    static func sample<Value>(_ found: [String: Value]) -> [String] {
        found.sorted { $0.key < $1.key }.prefix(5).map { "\($0.key): \($0.value)" }
    }

    /// How many lines of `bridge`'s log contain every one of `parts`.
    static func lines(in bridge: BridgeProcess, _ parts: [String]) -> Int {
        bridge.log.split(separator: "\n").filter { line in parts.allSatisfy { line.contains($0) } }.count
    }

    /// One answer of the history route, as a poller saw it.
    struct HistoryAnswer: Sendable {
        var at: Date
        var status: Int
        var points: [[String: String]]
        var problem: String?
    }

    /// Asks `path` on `port` every 200 ms until cancelled; every answer, failures included.
    static func pollHistory(port: Int, path: String, token: String) -> Task<[HistoryAnswer], Never> {
        Task {
            var answers: [HistoryAnswer] = []
            while !Task.isCancelled {
                do {
                    let reply = try await HTTP.send(port, path, method: "GET", token: token)
                    answers.append(HistoryAnswer(at: Date(), status: reply.status,
                                                 points: ClusterTests.json(reply)?["points"] as? [[String: String]] ?? [],
                                                 problem: reply.status == 200 ? nil : reply.text))
                } catch {
                    if Task.isCancelled { break }
                    answers.append(HistoryAnswer(at: Date(), status: 0, points: [], problem: "\(error)"))
                }
                do { try await Task.sleep(for: .milliseconds(200)) } catch { break }
            }
            return answers
        }
    }

    @Test func aKilledInstancesHomesComeBackOnTheOthersOnceAndItsShareReturns() async throws {
        try #require(TestBrokerKind.current == .mosquitto, "publishers are told apart in mosquitto's log")
        let server = try TestPostgres.shared()
        let url = server.url(database: try server.freshDatabase())
        let broker = try await TestBroker(logPublishes: true)
        var bridges: [BridgeProcess] = []
        defer { for bridge in bridges { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) } }
        // Readings every second: each instance steps every room once a second.
        bridges = try await PostgresClusterTests.startAll(broker: broker, url: url, lease: "3s", interval: 1)
        var clients: [String: Int] = [:]
        for (index, bridge) in bridges.enumerated() { clients[try Self.clientID(of: bridge)] = index }
        let holders = try Self.holders(url: url)
        let hashOwner = Dictionary(uniqueKeysWithValues: ClusterTests.userIDs.map { ($0, ClusterTests.membership.owner(of: $0)) })
        #expect(await eventually(timeout: 30) { (try? holders()) == hashOwner }, "every lease held by the user's hash owner")
        // From here on every user has one publisher; the start-up hand-backs are over.
        let settled = Int(Date().timeIntervalSince1970) + 1

        let victimUsers = ClusterTests.userIDs.filter { hashOwner[$0] == Self.victim }
        #expect(victimUsers.contains("1") && victimUsers.contains("2"))
        let victimRooms = victimUsers.flatMap { user in Self.rooms(of: user).map { "smarthome/\(user)/\($0)" } }
        let user = "1"
        let topics = victimRooms.flatMap { ["\($0)/temperature", "\($0)/humidity", "\($0)/availability"] }
            + ["smarthome/1/kitchen/lights", "smarthome/1/bedroom/lights", "smarthome/1/events"]
        let watcher = try await TestSubscriber(broker: broker, subscribe: topics, name: "victim-rooms")
        #expect(await eventually(timeout: 10) {
            Set(watcher.messages.map(\.topic).filter { $0.hasSuffix("/availability") }).count == victimRooms.count
        }, "the retained availability of every room of instance \(Self.victim)'s users")

        // Their history, polled on both instances that stay, from before the kill to the end of the takeover.
        let historyUsers = [("1", "Cemalettin")] + victimUsers.filter { $0.hasPrefix("u") }.prefix(2).map { ($0, "user\($0)") }
        var pollers: [(instance: Int, user: String, reference: [String: String], task: Task<[HistoryAnswer], Never>)] = []
        var token = ""
        for (id, username) in historyUsers {
            let userToken = try await APITests.token(bridges[0].httpPort, username, "12345")
            if id == user { token = userToken }
            let all = "/api/v1/rooms/kitchen/history?sensor=humidity"
            let recorded = try await ClusterTests.poll(until: { !$0.isEmpty }) {
                ClusterTests.json(try await HTTP.send(bridges[0].httpPort, all, method: "GET", token: userToken))?["points"]
                    as? [[String: String]] ?? []
            }
            // Since the owner's last point: every answer starts with it and only grows.
            let reference = try #require(recorded.last, "\(id) has history")
            let path = all + "&since=\(try #require(reference["t"]))"
            for instance in 0..<ClusterTests.instances where instance != Self.victim {
                pollers.append((instance, id, reference, Self.pollHistory(port: bridges[instance].httpPort, path: path,
                                                                          token: userToken)))
            }
        }
        try await Task.sleep(for: .seconds(1))

        bridges[Self.victim].signal(SIGKILL)
        let killed = Date()
        let afterKill = watcher.messages.count
        _ = bridges[Self.victim].waitForExit(timeout: 5)
        // Due in the second after the kill, so before the killed instance's leases expire (they were
        // renewed within the last lease / 3 and run for the lease); the bedroom light is its action.
        let due = Date(timeIntervalSince1970: (killed.timeIntervalSince1970 + 1).rounded(.up))
        let created = try await HTTP.send(bridges[0].httpPort, "/api/v1/alarms", method: "POST", body: Data(
            #"{"title":"During the takeover","fireDate":"\#(Timestamp.iso8601(due))","repeats":"never","action":{"room":"bedroom","lights":"ON"}}"#.utf8),
            token: token)
        #expect(created.status == 201, "\(created.text)")
        let uuid = try #require(ClusterTests.json(created)?["uuid"] as? String)

        // Within cluster.lease + 5 s every room of the killed instance's users is announced online
        // again (the last word on its availability) and its values are published again.
        let sinceKill = { watcher.messages.dropFirst(afterKill) }
        let missing = { () -> [String] in
            let recent = sinceKill()
            let online = Dictionary(recent.filter { $0.topic.hasSuffix("/availability") }.map { ($0.topic, $0.text) }) { $1 }
            let published = Set(recent.map(\.topic).filter { $0.hasSuffix("/temperature") })
            return victimRooms.filter { online["\($0)/availability"] != "online" || !published.contains("\($0)/temperature") }
        }
        let back = await eventually(timeout: Self.lease + 5 - Date().timeIntervalSince(killed)) { missing().isEmpty }
        let backAt = Date()
        #expect(back, "\(missing().count) of \(victimRooms.count) rooms not back \(Self.lease + 5) s after the kill: \(missing().prefix(5))")
        let takers = try holders().filter { victimUsers.contains($0.key) }
        #expect(takers.count == victimUsers.count && takers.values.allSatisfy { $0 != Self.victim },
                "every user of the killed instance held by another: \(takers.filter { $0.value == Self.victim }.prefix(3))")
        let taker = try #require(takers[user])
        let other = (0..<ClusterTests.instances).first { $0 != Self.victim && $0 != taker }!

        // A light command through the instance that did not take the user is applied once, by the taker.
        let beforeCommand = watcher.messages.count
        let reply = try await HTTP.send(bridges[other].httpPort, "/api/v1/rooms/kitchen/lights", method: "POST",
                                        body: Data(#"{"state":"ON"}"#.utf8), token: token)
        #expect(reply.status == 200, "\(reply.text)")
        try await Task.sleep(for: .seconds(1))
        let kitchenLights = watcher.messages.dropFirst(beforeCommand).filter { $0.topic == "smarthome/1/kitchen/lights" }
        #expect(kitchenLights.map(\.text) == ["ON"], "applied once")
        #expect(Self.lines(in: bridges[taker], ["light switched", "user=1 room=kitchen"]) == 1)
        #expect(Self.lines(in: bridges[other], ["light switched"]) == 0)

        // The alarm that fell due while nobody held the user fires once, on the taker, its action applied once.
        try await watcher.waitFor(timeout: 15) { $0.topic == "smarthome/1/events" && $0.text.contains(uuid) }
        try await Task.sleep(for: .seconds(2))
        #expect(sinceKill().filter { $0.topic == "smarthome/1/events" && $0.text.contains(uuid) }.count == 1)
        #expect(Self.lines(in: bridges[taker], ["alarm fired", "alarm=\(uuid)"]) == 1)
        #expect(Self.lines(in: bridges[other], ["alarm fired"]) == 0)
        // Counted in the log: the taker's re-announce may carry the light's state from before or after it.
        #expect(Self.lines(in: bridges[taker], ["light switched", "user=1 room=bedroom"]) == 1)
        #expect(Self.lines(in: bridges[other], ["user=1 room=bedroom"]) == 0)
        #expect(sinceKill().last { $0.topic == "smarthome/1/bedroom/lights" }?.text == "ON")

        // Live readings again in every room (humidity moves almost every step), not only the re-announce.
        let quiet = { () -> [String] in
            var counts: [String: Int] = [:]
            for message in sinceKill() where message.topic.hasSuffix("/humidity") { counts[message.topic, default: 0] += 1 }
            return victimRooms.filter { counts["\($0)/humidity", default: 0] < 2 }
        }
        #expect(await eventually(timeout: 15) { quiet().isEmpty }, "rooms without new readings: \(quiet().prefix(5))")

        // History answered throughout, on both instances, with the killed owner's points and then the taker's.
        for poller in pollers {
            poller.task.cancel()
            let answers = await poller.task.value
            let label = "history of \(poller.user) on instance \(poller.instance)"
            #expect(answers.first.map { $0.at < killed } == true && answers.last.map { $0.at > backAt } == true,
                    "\(label): polled from before the kill to after the takeover")
            let failed = answers.filter { $0.status != 200 || $0.points.first != poller.reference }
            #expect(failed.isEmpty, "\(label): \(failed.count) of \(answers.count) answers wrong: \(failed.prefix(2))")
            let counts = answers.map(\.points.count)
            #expect(counts == counts.sorted(), "\(label) lost points: \(counts)")
            let newest = answers.last?.points.last?["t"].flatMap(Alarm.parseDate)
            #expect(newest.map { $0 > killed.addingTimeInterval(Self.lease) } == true, "\(label): the taker's points")
        }
        let takeoverEnded = Int(Date().timeIntervalSince1970)

        // Restarted, the killed instance gets its share back from the takers.
        bridges[Self.victim] = try await PostgresClusterTests.start(Self.victim, broker: broker, url: url, lease: "3s", interval: 1)
        clients[try Self.clientID(of: bridges[Self.victim])] = Self.victim
        #expect(await eventually(timeout: 20) { (try? holders()) == hashOwner }, "rebalanced to the hash owners")
        #expect(bridges[taker].log.contains("handed_back="))
        try await Task.sleep(for: .seconds(Self.lease / 3 + 1))
        let steady = Int(Date().timeIntervalSince1970)
        try await Task.sleep(for: .seconds(4))
        let end = Int(Date().timeIntervalSince1970) - 1
        let availability = Dictionary(watcher.messages.filter { $0.topic.hasSuffix("/availability") }.map { ($0.topic, $0.text) }) { $1 }
        #expect(victimRooms.allSatisfy { availability["\($0)/availability"] == "online" })

        // Who published what: each user's readings, lights and room JSON by one instance at a time
        // (availability is left out: a live instance announces a dead one's rooms offline).
        let log = try BrokerPublishLog(broker: broker)
        let home = Set(ClusterTests.userIDs)
        let isState = { (topic: String) -> Bool in
            let parts = topic.split(separator: "/")
            guard parts.count >= 3, home.contains(String(parts[1])), parts.last != "availability", parts.last != "set",
                  parts.last != "events" else { return false }
            return parts.count == 3 || ClusterTests.isSensorTopic(topic)
        }
        let settledLog = log.since(settled)
        let runs = settledLog.publisherRuns(topics: isState) { clients[$0] }
        let wrong = runs.filter { topic, run in
            let owner = String(topic.split(separator: "/")[1])
            // Its owner until the kill, its taker, its owner again (a topic may skip a turn, such as
            // the every-light group state, published only when a light changes).
            let turns = takers[owner].map { [Self.victim, $0, Self.victim] } ?? [hashOwner[owner]!]
            return !Self.isInOrder(run, within: turns)
        }
        let victimRuns = runs.filter { takers[String($0.key.split(separator: "/")[1])] != nil }
        #expect(victimRuns.count >= victimRooms.count * 4, "publishes logged for \(victimRuns.count) topics")
        #expect(wrong.isEmpty, "\(wrong.count) topics with publishers out of turn: \(Self.sample(wrong))")
        // And literally: before the kill, during the takeover and once rebalanced, no second has
        // two publishers of one topic (the hand-back itself may fall inside one second, in turn).
        for (window, seconds) in [("before the kill", settled...Int(killed.timeIntervalSince1970) - 1),
                                  ("during the takeover", Int(killed.timeIntervalSince1970)...takeoverEnded),
                                  ("rebalanced", steady...end)] {
            let shared = settledLog.sharedSeconds(topics: isState, in: seconds) { clients[$0] }
            #expect(shared.isEmpty, "\(window): \(shared.count) topics published by two instances in one second: \(Self.sample(shared))")
        }
        let handBacks = settledLog.sharedSeconds(topics: isState, in: takeoverEnded...end) { clients[$0] }
        let patterns = Dictionary(grouping: victimRuns.values, by: { $0 }).mapValues(\.count)
        print("PostgresFailoverTests: \(settledLog.publishes.count) publishes logged; rooms back "
              + String(format: "%.1f", backAt.timeIntervalSince(killed)) + " s after the kill; publishers of the "
              + "killed instance's topics: \(patterns); \(handBacks.count) hand-backs within one second")
    }
}
