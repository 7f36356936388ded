import BridgeCore
import BridgeStorage
import Foundation
import Testing

/// What only the SQLite driver does, against real files in a temporary folder (the assertions
/// every engine shares are `StoreTests`).
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
