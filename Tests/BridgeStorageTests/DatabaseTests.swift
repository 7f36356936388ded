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
        #expect(tables.contains("sessions"))
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

    @Test func boundParametersAreNeverSQL() throws {
        let database = try Database(path: path)
        let sessions = SessionStore(database: database)
        let evil = "x'); DROP TABLE sessions; --"
        try sessions.create(tokenHash: evil, userID: "1", now: Date(), expiresAt: Date().addingTimeInterval(60))
        #expect(try sessions.userID(tokenHash: evil, now: Date()) == "1")
        #expect(try database.query("SELECT count(*) FROM sessions").first?.first?.integer == 1)
    }

    @Test func sessionsExpireAndAreRevoked() throws {
        let sessions = SessionStore(database: try Database(path: path))
        let now = Date()
        try sessions.create(tokenHash: "a", userID: "1", now: now, expiresAt: now.addingTimeInterval(10))
        try sessions.create(tokenHash: "b", userID: "2", now: now, expiresAt: now.addingTimeInterval(10))
        #expect(try sessions.userID(tokenHash: "a", now: now) == "1")
        #expect(try sessions.userID(tokenHash: "a", now: now.addingTimeInterval(11)) == nil)
        #expect(try sessions.revoke(tokenHash: "b"))
        #expect(try !sessions.revoke(tokenHash: "b"))
        #expect(try sessions.userID(tokenHash: "b", now: now) == nil)
        #expect(try sessions.purgeExpired(now: now.addingTimeInterval(11)) == 1)
        #expect(throws: StorageError.self) {
            try sessions.create(tokenHash: "a2", userID: "1", now: now, expiresAt: now)
            try sessions.create(tokenHash: "a2", userID: "1", now: now, expiresAt: now)  // duplicate key
        }
    }

    @Test func sessionsSurviveReopening() throws {
        let now = Date()
        do {
            let sessions = SessionStore(database: try Database(path: path))
            try sessions.create(tokenHash: "kept", userID: "1", now: now, expiresAt: now.addingTimeInterval(60))
        }
        let reopened = SessionStore(database: try Database(path: path))
        #expect(try reopened.userID(tokenHash: "kept", now: now) == "1")
    }

    /// Statements are kept prepared between runs: each run must start clean, after a failed run too.
    @Test func reusedStatementsForgetTheirLastRun() throws {
        let database = try Database(path: path)
        #expect(try database.query("SELECT ?, ?", [.integer(1), .text("a")]) == [[.integer(1), .text("a")]])
        #expect(try database.query("SELECT ?, ?", [.integer(2)]) == [[.integer(2), .null]], "no stale binding")
        let insert = "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)"
        try database.execute(insert, [.text("t1"), .text("1"), .real(0), .real(10)])
        #expect(throws: StorageError.self) {
            try database.execute(insert, [.text("t1"), .text("2"), .real(0), .real(10)])  // duplicate key
        }
        #expect(try database.execute(insert, [.text("t2"), .text("2"), .real(0), .real(10)]) == 1)
        // A read whose rows were all taken must not keep a read transaction open against the writer.
        #expect(try database.query("SELECT token_hash FROM sessions ORDER BY token_hash").count == 2)
        let deleted = try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            try connection.execute("DELETE FROM sessions WHERE token_hash = ?", [.text("t1")])
        }
        #expect(deleted == 1)
        #expect(try database.query("SELECT token_hash FROM sessions ORDER BY token_hash") == [[.text("t2")]])
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
