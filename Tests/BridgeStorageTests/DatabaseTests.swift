import BridgeCore
import BridgeStorage
import Foundation
import Testing

/// The storage adapter against real SQLite files in a temporary folder.
@Suite struct DatabaseTests {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("storage-\(UUID().uuidString)")

    var path: String { folder.appendingPathComponent("nested/bridge.sqlite").path }

    @Test func opensInWALModeWithTheSchemaMigrated() throws {
        let database = try Database(path: path)
        #expect(database.schemaVersion == Migration.all.last?.version)
        #expect(try database.query("PRAGMA journal_mode").first?.first?.text == "wal")
        let tables = try database.query("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap { $0.first?.text }
        #expect(tables.contains("revoked_sessions"))
        #expect(tables.contains("settings"))
        #expect(!tables.contains("sessions"), "stored sessions gave way to signed tokens")
    }

    /// The database holds the token signing key: folder 0700, the file and its WAL and shared-memory files
    /// 0600, whatever the process's umask; files made readable later are reported.
    @Test func filesAreCreatedPrivateAndExposedOnesAreReported() throws {
        let database = try Database(path: path)
        _ = try database.execute("INSERT INTO settings (key, value) VALUES ('k', 'v')")
        func mode(_ file: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) ?? -1
        }
        #expect(try mode((path as NSString).deletingLastPathComponent) == 0o700)
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(try mode(file) == 0o600, "\(file)")
        }
        #expect(StorageFiles.readableByOthers(databasePath: path).isEmpty)

        chmod(path, 0o644)
        #expect(StorageFiles.readableByOthers(databasePath: path) == ["\(path) (0644)"])
    }

    @Test func migrationsRunOnceAndOnlyForward() throws {
        let first = [Migration(version: 1, statements: ["CREATE TABLE a (x TEXT)"])]
        _ = try Database(path: path, migrations: first)
        let second = first + [Migration(version: 2, statements: ["CREATE TABLE b (y TEXT)"])]
        let database = try Database(path: path, migrations: second)  // would fail if version 1 ran again
        #expect(database.schemaVersion == 2)
        _ = try Database(path: path, migrations: second)
    }

    @Test func aFailingMigrationLeavesNothingHalfDone() throws {
        let broken = [Migration(version: 1, statements: ["CREATE TABLE a (x TEXT)", "NOT SQL AT ALL"])]
        #expect(throws: StorageError.self) { _ = try Database(path: path, migrations: broken) }
        let database = try Database(path: path, migrations: [])
        #expect(database.schemaVersion == 0)
        #expect(try database.query("SELECT name FROM sqlite_master WHERE name = 'a'").isEmpty)
    }

    @Test func watchdogsKeepTheirFieldsAndEpisodeAcrossReopeningAndAnEditRearmsThem() throws {
        let armed = Date(timeIntervalSince1970: 1_796_083_200)
        let watchdog = Watchdog(uuid: "w1", userID: "1", title: "Warm", room: "bedroom", sensor: .temperature,
                                condition: .above, value: 28.5, duration: 1800,
                                quiet: Watchdog.QuietHours(from: 22 * 60, to: 7 * 60))
        do {
            let store = WatchdogStore(database: try Database(path: path))
            try store.insert(watchdog, now: armed)
            let fired = WatchdogState(phase: .fired, firedAt: armed.addingTimeInterval(60),
                                      breachSince: armed.addingTimeInterval(10), armedAt: armed)
            try store.save(fired, uuid: "w1")
        }
        let store = WatchdogStore(database: try Database(path: path))
        let (kept, state) = try #require(try store.watchdog(uuid: "w1", userID: "1"))
        #expect(kept == watchdog)
        #expect(state.phase == .fired && state.firedAt == armed.addingTimeInterval(60)
            && state.breachSince == armed.addingTimeInterval(10))
        #expect(try store.watchdog(uuid: "w1", userID: "2") == nil, "another user's watchdog")
        #expect(try store.count(userID: "1") == 1)
        #expect(try store.update(watchdog, now: armed.addingTimeInterval(99)))
        let (_, rearmed) = try #require(try store.watchdog(uuid: "w1", userID: "1"))
        #expect(rearmed == WatchdogState(armedAt: armed.addingTimeInterval(99)))
        #expect(try store.delete(uuid: "w1", userID: "2") == false)
        #expect(try store.delete(uuid: "w1", userID: "1"))
        #expect(try store.enabled().isEmpty)
    }

    @Test func announcedConfigsAreReplacedAsAWholeAndSurviveReopening() throws {
        let store = AnnouncedConfigStore(database: try Database(path: path))
        #expect(try store.topics().isEmpty)
        try store.replace(with: ["ha/light/a/lights/config", "ha/sensor/a/temperature/config"])
        try store.replace(with: ["ha/light/a/lights/config", "ha/light/b/lights/config"])
        let reopened = AnnouncedConfigStore(database: try Database(path: path))
        #expect(try reopened.topics() == ["ha/light/a/lights/config", "ha/light/b/lights/config"])
        try reopened.replace(with: [])
        #expect(try store.topics().isEmpty)
    }

    @Test func boundParametersAreNeverSQL() throws {
        let database = try Database(path: path)
        let revocations = RevocationStore(database: database)
        let evil = "x'); DROP TABLE revoked_sessions; --"
        try revocations.add(id: evil, expiresAt: 100)
        #expect(try revocations.live(now: 0).map(\.id) == [evil])
        #expect(try database.query("SELECT count(*) FROM revoked_sessions").first?.first?.integer == 1)
    }

    @Test func revocationsLastUntilTheirTokensExpire() throws {
        let revocations = RevocationStore(database: try Database(path: path))
        try revocations.add(id: "a", expiresAt: 100)
        try revocations.add(id: "b", expiresAt: 200)
        try revocations.add(id: "b", expiresAt: 200)  // revoking twice is not an error
        #expect(try revocations.live(now: 99).map(\.id).sorted() == ["a", "b"])
        #expect(try revocations.live(now: 100).map(\.id) == ["b"])
        #expect(try revocations.purgeExpired(now: 100) == 1)
        let reopened = RevocationStore(database: try Database(path: path))
        #expect(try reopened.live(now: 0).map(\.expiresAt) == [200])
    }

    @Test func aSettingIsWrittenOnceAndKept() throws {
        let settings = SettingsStore(database: try Database(path: path))
        #expect(try settings.value(of: "k") == nil)
        #expect(try settings.value(of: "k", orInsert: { "first" }) == "first")
        #expect(try settings.value(of: "k", orInsert: { "second" }) == "first")
        #expect(try SettingsStore(database: try Database(path: path)).value(of: "k") == "first")
    }

    @Test func upgradingDropsStoredSessions() throws {
        let before = Array(Migration.all.prefix { $0.version < 3 })
        let old = try Database(path: path, migrations: before)
        try old.execute("INSERT INTO sessions VALUES ('h', '1', 0, 1e12)")
        let upgraded = try Database(path: path)
        #expect(upgraded.schemaVersion == Migration.all.last?.version)
        #expect(try upgraded.query("SELECT name FROM sqlite_master WHERE name = 'sessions'").isEmpty)
    }

    /// Statements are kept prepared between runs: each run must start clean, after a failed run too.
    @Test func reusedStatementsForgetTheirLastRun() throws {
        let database = try Database(path: path)
        #expect(try database.query("SELECT ?, ?", [.integer(1), .text("a")]) == [[.integer(1), .text("a")]])
        #expect(try database.query("SELECT ?, ?", [.integer(2)]) == [[.integer(2), .null]], "no stale binding")
        let insert = "INSERT INTO revoked_sessions (id, expires_at) VALUES (?, ?)"
        try database.execute(insert, [.text("t1"), .integer(10)])
        #expect(throws: StorageError.self) {
            try database.execute(insert, [.text("t1"), .integer(20)])  // duplicate key
        }
        #expect(try database.execute(insert, [.text("t2"), .integer(10)]) == 1)
        // A read whose rows were all taken must not keep a read transaction open against the writer.
        #expect(try database.query("SELECT id FROM revoked_sessions ORDER BY id").count == 2)
        let deleted = try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            try connection.execute("DELETE FROM revoked_sessions WHERE id = ?", [.text("t1")])
        }
        #expect(deleted == 1)
        #expect(try database.query("SELECT id FROM revoked_sessions ORDER BY id") == [[.text("t2")]])
    }

    /// More distinct statements than the cache holds still run (prepared per run past its size).
    @Test func statementsBeyondTheCacheStillRun() throws {
        let database = try Database(path: path)
        for number in 0..<200 {
            #expect(try database.query("SELECT \(number) + ?", [.integer(1)]) == [[.integer(Int64(number) + 1)]])
        }
        #expect(try database.query("SELECT 5 + ?", [.integer(2)]) == [[.integer(7)]])
    }

    @Test func eachSensorKeepsItsNewestValueOfABatch() throws {
        let history = HistoryStore(database: try Database(path: path))
        let start = Date(timeIntervalSince1970: 1_000)
        let rows = (0..<6).map { step in
            HistoryStore.Row(user: "1", room: step % 2 == 0 ? "kitchen" : "garden", sensor: "temperature",
                             time: start.addingTimeInterval(Double(step)), value: "2\(step).0")
        }
        try history.append(rows)
        #expect(try history.count() == 6)
        let last = try history.lastValues().sorted { $0.room < $1.room }
        #expect(last == [rows[5], rows[4]])
        try history.append([rows[0]])
        #expect(try history.lastValues().first { $0.room == "kitchen" }?.value == "20.0")
    }

    @Test func aFileThatIsNotADatabaseIsAClearError() throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let junk = folder.appendingPathComponent("junk.sqlite").path
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: junk))
        do {
            _ = try Database(path: junk)
            Issue.record("opened a file that is not a database")
        } catch {
            #expect(error.description.contains("not a database") || error.description.contains("file"), "\(error)")
        }
    }
}
