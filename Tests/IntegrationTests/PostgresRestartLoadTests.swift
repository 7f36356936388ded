import BridgeCore
import BridgeMQTT
import BridgeStorage
import Foundation
import PostgresTestSupport
import Testing

/// PostgreSQL restarted under a loaded bridge (README "PostgreSQL"): the demo users and 200
/// generated ones (`ClusterTests.extraUsers`, 416 rooms) stepped every half second: about 1,000
/// history rows a second (only changed values are published, README "MQTT"). The bridge keeps
/// publishing while the database is down, its history writes resume, and nothing acknowledged is
/// lost.
///
/// "Acknowledged" here: a reading the bridge published on MQTT (a subscriber received it). The
/// bridge records exactly the readings it publishes and keeps a batch that could not be written
/// (up to `HistoryRecorder.maxPending` rows) for the next write, so every reading published over
/// the window, the outage included, must be in the `readings` table, in order, none missing
/// between two of them.
@Suite(.timeLimit(.minutes(3)))
struct PostgresRestartLoadTests {
    /// 48 sensors the subscriber counts: user 1's eight rooms' humidity, and the kitchen humidity
    /// and bedroom temperature of 20 generated users.
    static let sensors: [(user: String, room: String, sensor: String)] =
        PostgresFailoverTests.demoRooms.map { ("1", $0, "humidity") }
        + (1...20).flatMap { number -> [(user: String, room: String, sensor: String)] in
            let user = String(format: "u%03d", number)
            return [(user, "kitchen", "humidity"), (user, "bedroom", "temperature")]
        }

    static func topic(_ sensor: (user: String, room: String, sensor: String)) -> String {
        "smarthome/\(sensor.user)/\(sensor.room)/\(sensor.sensor)"
    }

    /// The rows of `sensor`, oldest first, a row written twice counted once; and how many such
    /// repeats there were (none may be: a batch written again after its COMMIT's answer was lost
    /// adds nothing, README "PostgreSQL").
    static func recorded(_ sensor: (user: String, room: String, sensor: String), in database: Database) throws
        -> (values: [String], repeats: Int)
    {
        let rows = try database.query(
            "SELECT t, value FROM readings WHERE user_id = ? AND room_id = ? AND sensor = ? ORDER BY t, rowid",
            [.text(sensor.user), .text(sensor.room), .text(sensor.sensor)])
        var values: [String] = []
        var last: [SQLValue]?
        var repeats = 0
        for row in rows {
            if row == last { repeats += 1; continue }
            last = row
            values.append(row.last?.text ?? "")
        }
        return (values, repeats)
    }

    /// Whether `published` is a run of consecutive rows of `values`.
    static func isRun(_ published: [String], of values: [String]) -> Bool {
        guard values.count >= published.count else { return false }
        return (0...(values.count - published.count)).contains { Array(values[$0..<$0 + published.count]) == published }
    }

    @Test func aRestartedDatabaseUnderLoadLosesNoPublishedReading() async throws {
        let server = try TestPostgres.start()
        defer { try? server.stop() }
        let url = server.url(database: try server.freshDatabase())
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "source:\n  interval: 0.5\n  seed: 5\n",
                                             extraUsers: ClusterTests.extraUsers,
                                             environment: ["SMARTHOME_STORAGE_URL": url,
                                                           "SMARTHOME_HOMEASSISTANT_DISCOVERY": "false"])
        defer { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) }
        let topics = Self.sensors.map(Self.topic)
        let watcher = try await TestSubscriber(broker: broker, subscribe: topics, name: "readings")
        // Exact subscriptions: each topic's retained value comes first; the live readings follow.
        #expect(await eventually(timeout: 10) { Set(watcher.messages.map(\.topic)).count == topics.count })
        let windowStart = Date()
        try await Task.sleep(for: .seconds(2))

        try server.stop()
        let beforeOutage = watcher.messages.count
        try await Task.sleep(for: .seconds(3))
        let duringOutage = watcher.messages.count - beforeOutage
        #expect(duringOutage > topics.count, "\(duringOutage) readings of \(topics.count) sensors published in 3 s without the database")
        try server.startServer()
        let restarted = Date()
        try await Task.sleep(for: .seconds(3))
        let windowEnd = Date()
        var published: [String: [String]] = [:]
        for message in watcher.messages { published[message.topic, default: []].append(message.text) }
        published = published.mapValues { Array($0.dropFirst()) }

        // History writes resume: rows from after the restart, and the route answers from them.
        let database = try Database(url: try StorageURL.parse(url).get())
        let newest = { try database.query("SELECT max(t) FROM readings").first?.first?.real ?? 0 }
        #expect(await eventually(timeout: 20) { ((try? newest()) ?? 0) > restarted.timeIntervalSince1970 })
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let history = try await HTTP.send(
            bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=humidity&since=\(Timestamp.iso8601(restarted))",
            method: "GET", token: token)
        #expect(history.status == 200, "\(history.text)")
        #expect((ClusterTests.json(history)?["points"] as? [Any])?.isEmpty == false, "\(history.text)")

        // Every reading published is recorded: the batches kept over the outage are written once the
        // database is back (waited for: under load they may take a few flushes).
        let unrecorded = { () -> [String] in
            Self.sensors.filter { sensor in
                guard let values = try? Self.recorded(sensor, in: database).values else { return true }
                return !Self.isRun(published[Self.topic(sensor)] ?? [], of: values)
            }.map(Self.topic)
        }
        _ = await eventually(timeout: 20) { unrecorded().isEmpty }
        let missing = unrecorded()
        #expect(missing.isEmpty, "readings published but not all recorded in order: \(missing.prefix(3).map { ($0, published[$0] ?? []) })")
        let count = published.values.map(\.count).reduce(0, +)
        #expect(count >= topics.count * 5, "\(count) readings published over the window")
        let repeats = try Self.sensors.map { try Self.recorded($0, in: database).repeats }.reduce(0, +)
        #expect(repeats == 0, "\(repeats) readings recorded twice")
        let rows = try database.query("SELECT count(*) FROM readings WHERE t >= ? AND t < ?",
                                      [.real(windowStart.timeIntervalSince1970), .real(windowEnd.timeIntervalSince1970)])
        let rate = Double(rows.first?.first?.integer ?? 0) / windowEnd.timeIntervalSince(windowStart)
        #expect(bridge.log.contains("cannot record history") && bridge.log.contains("kept=true"),
                "a write failed while the database was down, and its batch was kept")
        print("PostgresRestartLoadTests: \(count) readings of \(topics.count) sensors published, every one recorded, none twice; "
              + "\(duringOutage) while the database was down; "
              + "\(Int(rate)) history rows/s of all sensors over the window")
    }
}
