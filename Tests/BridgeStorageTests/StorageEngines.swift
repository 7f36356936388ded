import BridgeCore
import BridgeStorage
import Foundation
import PostgresTestSupport
import Testing

/// The engines the storage suite runs its assertions on: a SQLite file and a real PostgreSQL.
enum Engine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// One test's database on one engine: a file in a fresh folder, or a fresh database on the test
/// process's PostgreSQL. `open()` opens (and migrates) it; opening again is reopening it.
struct TestDatabase {
    let engine: Engine
    let url: StorageURL

    init(_ engine: Engine) throws {
        self.engine = engine
        switch engine {
        case .sqlite:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("storage-\(UUID().uuidString)")
            url = .sqlite(path: folder.appendingPathComponent("nested/bridge.sqlite").path)
        case .postgres:
            let server = try TestPostgres.shared()
            url = try StorageURL.parse(server.url(database: try server.freshDatabase())).get()
        }
    }

    func open(migrations: [Migration] = Migration.all) throws(StorageError) -> Database {
        try Database(url: url, migrations: migrations)
    }

    /// The names of the tables in `database`.
    static func tables(_ database: Database) throws -> [String] {
        let sql = database.dialect == .sqlite
            ? "SELECT name FROM sqlite_master WHERE type = 'table'"
            : "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'bridge_schema'"
        return try database.query(sql).compactMap { $0.first?.text }
    }
}
