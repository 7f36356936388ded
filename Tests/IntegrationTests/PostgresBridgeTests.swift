import BridgeCore
import BridgeStorage
import Foundation
import PostgresTestSupport
import Testing

/// The real bridge on `storage.url: postgres://…` (README "PostgreSQL"), against a real
/// PostgreSQL the test starts and a real mosquitto.
@Suite(.timeLimit(.minutes(2)))
struct PostgresBridgeTests {
    @Test func recordsHistoryAnswersFromItAndKeepsAlarmsAcrossARestart() async throws {
        let server = try TestPostgres.shared()
        let url = server.url(database: try server.freshDatabase())
        let broker = try await TestBroker()
        let environment = ["SMARTHOME_STORAGE_URL": url]
        var bridge = try await BridgeProcess(broker: broker, environment: environment)
        var token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let alarm = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST",
                                        body: AlarmsAndHistoryTests.alarmBody("Wake", at: Date(timeIntervalSinceNow: 86_400)),
                                        token: token)
        #expect(alarm.status == 201, "\(alarm.text)")
        let alarmID = try #require(AlarmsAndHistoryTests.object(alarm)["uuid"] as? String)
        try await Task.sleep(for: .seconds(2.5))  // readings every 0.2 s, flushed every second

        let history = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature&limit=10000",
                                          method: "GET", token: token)
        #expect(history.status == 200)
        let points = try #require(AlarmsAndHistoryTests.object(history)["points"] as? [[String: String]])
        #expect(points.count >= 2, "\(history.text)")
        // The rows are in PostgreSQL, and no SQLite file was made beside the config.
        let database = try Database(url: try StorageURL.parse(url).get())
        let rows = try database.query("SELECT count(*) FROM readings WHERE user_id = '1' AND room_id = 'kitchen' AND sensor = 'temperature'")
        #expect((rows.first?.first?.integer ?? 0) >= Int64(points.count))
        #expect(try database.query("SELECT count(*) FROM alarms") == [[.integer(1)]])
        #expect(!FileManager.default.fileExists(atPath: bridge.directory.appendingPathComponent("bridge.sqlite").path))

        bridge.signal(SIGTERM)
        _ = bridge.waitForExit(timeout: 10)
        bridge = try await BridgeProcess(broker: broker, environment: environment)
        token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let kept = try await HTTP.send(bridge.httpPort, "/api/v1/alarms/\(alarmID)", method: "GET", token: token)
        #expect(kept.status == 200)
        #expect(AlarmsAndHistoryTests.object(kept)["title"] as? String == "Wake")
        let again = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature&limit=10000",
                                        method: "GET", token: token)
        let pointsAgain = try #require(AlarmsAndHistoryTests.object(again)["points"] as? [[String: String]])
        #expect(pointsAgain.count >= points.count, "history kept across the restart")
    }

    /// A storage.url the bridge cannot reach: it refuses to start with an error naming the key and
    /// the server, never the password.
    @Test func anUnreachableDatabaseIsAClearErrorWithoutThePassword() async throws {
        let directory = try TestFiles.makeDirectory("pg-unreachable")
        do {
            let bridge = try await BridgeProcess.launch(
                config: BridgeProcess.demoConfig(settings: ""), in: directory,
                environment: ["SMARTHOME_STORAGE_URL": "postgres://bridge:t0p-s3cret@127.0.0.1:1/homes"])
            bridge.process.terminate()
            Issue.record("the bridge started without its database")
        } catch {
            let log = (try? String(contentsOfFile: directory.appendingPathComponent("bridge.log").path, encoding: .utf8)) ?? ""
            #expect(log.contains("storage.url postgres://bridge:***@127.0.0.1:1/homes"), "\(log)")
            #expect(!log.contains("t0p-s3cret"), "\(log)")
        }
    }
}

/// PostgreSQL restarted under the running bridge (README "PostgreSQL"): the bridge keeps
/// publishing, history writes resume on the reopened connection, and every reading published
/// meanwhile is in the database.
@Suite(.timeLimit(.minutes(2)))
struct PostgresRestartTests {
    @Test func aRestartedDatabaseLosesNoPublishedReading() async throws {
        let server = try TestPostgres.start()
        defer { try? server.stop() }
        let url = server.url(database: try server.freshDatabase())
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_STORAGE_URL": url])
        defer { bridge.signal(SIGTERM); _ = bridge.waitForExit(timeout: 5) }
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/1/kitchen/temperature"])
        try await Task.sleep(for: .seconds(1.5))
        try server.stop()
        let beforeRestart = watcher.messages.count
        try await Task.sleep(for: .seconds(1.5))
        #expect(watcher.messages.count > beforeRestart, "the bridge keeps publishing while the database is down")
        try server.startServer()
        try await Task.sleep(for: .seconds(2))
        // A loaded machine may publish fewer readings in these 5 s than the ten asked for below.
        _ = await eventually(timeout: 10) { watcher.messages.count > 10 }
        // Live readings only (the first message is the retained value), then one flush more.
        let published = watcher.messages.dropFirst().map(\.text)
        try await Task.sleep(for: .seconds(1.5))

        let database = try Database(url: try StorageURL.parse(url).get())
        let recorded = try database.query(
            "SELECT value FROM readings WHERE user_id = '1' AND room_id = 'kitchen' AND sensor = 'temperature' ORDER BY t, rowid"
        ).compactMap { $0.first?.text }
        #expect(published.count >= 10, "\(published.count) readings published")
        let found = recorded.count >= published.count
            && (0...(recorded.count - published.count)).contains { Array(recorded[$0..<$0 + published.count]) == published }
        #expect(found, "published \(published) not all recorded in order: \(recorded)")
        #expect(bridge.log.contains("cannot record history") && bridge.log.contains("kept=true"),
                "a write failed while the database was down, and its batch was kept: \(bridge.log)")
    }
}
