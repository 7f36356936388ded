import BridgeCore
import Foundation
import Synchronization

/// The bridge's database: a SQLite file or a PostgreSQL database (`storage.url`, README
/// "PostgreSQL"), its schema brought up to date at open. Stores are written once against this
/// type: `execute`, `query` and `transaction`, SQL with `?` placeholders and bound parameters in
/// the dialect both engines accept (see `SQLDialect`).
///
/// One connection serves the bridge; a `Mutex` serialises its use, because libmicrohttpd's
/// threads and async code both reach it. Work that must not wait behind another's transaction
/// (the cluster's leases, docs/scaling.md "Leases") gets a `separateConnection()`.
public final class Database: Sendable {
    private let connection: Mutex<DatabaseConnection>
    public let url: StorageURL
    public let dialect: SQLDialect

    /// The SQLite file, nil on PostgreSQL.
    public var path: String? { if case .sqlite(let path) = url { path } else { nil } }

    /// Opens (creating if needed, with its folder: 0700 and 0600, see `StorageFiles`) and migrates
    /// the SQLite database at `path`.
    public convenience init(path: String, migrations: [Migration] = Migration.all) throws(StorageError) {
        try self.init(url: .sqlite(path: path), migrations: migrations)
    }

    /// Opens and migrates the database at `url`.
    public init(url: StorageURL, migrations: [Migration] = Migration.all) throws(StorageError) {
        self.url = url
        let driver: any SQLDriver
        switch url {
        case .sqlite(let path):
            StorageFiles.prepare(path: path)
            driver = try SQLiteDriver(path: path)
        case .postgres(let server):
            driver = try PostgresDriver(server: server)
        }
        dialect = driver.dialect
        connection = Mutex(DatabaseConnection(driver))
        try migrate(migrations)
    }

    /// Another connection to the same database, with a lock of its own, so its statements never
    /// wait behind this one's transactions (only the database's own row locks order them). The
    /// schema is this one's: nothing is migrated again.
    public func separateConnection() throws(StorageError) -> Database {
        try Database(url: url, migrations: [])
    }

    /// The schema version.
    public var schemaVersion: Int {
        (try? connection.withLock { (handle: inout DatabaseConnection) throws(StorageError) -> Int in
            try handle.driver.schemaVersion()
        }) ?? 0
    }

    /// One transaction per migration; each reads the version again under the schema lock, so
    /// processes opening one database at once never run a step twice.
    private func migrate(_ migrations: [Migration]) throws(StorageError) {
        for migration in migrations {
            try transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
                try connection.driver.lockSchema()
                guard try connection.driver.schemaVersion() < migration.version else { return }
                for statement in migration.statements(in: connection.dialect) {
                    do throws(StorageError) {
                        try connection.executeOnce(statement)
                    } catch {
                        var failed = error
                        failed.context = "migrate to version \(migration.version): \(error.context)"
                        throw failed
                    }
                }
                try connection.driver.setSchemaVersion(migration.version)
            }
        }
    }

    /// Runs `body` in one transaction, holding the connection for its whole length so no other
    /// thread's statement lands inside it: all of it is committed, or none of it. When the
    /// connection to PostgreSQL is lost before `COMMIT` was sent, nothing was committed, so the
    /// whole transaction runs once more on the reopened connection.
    public func transaction<T>(_ body: (borrowing DatabaseConnection) throws(StorageError) -> T) throws(StorageError) -> T {
        try connection.withLock { (handle: inout DatabaseConnection) throws(StorageError) -> T in
            var attempt = 0
            while true {
                attempt += 1
                var committing = false
                do throws(StorageError) {
                    try handle.driver.begin()
                    let result = try body(handle)
                    committing = true
                    try handle.driver.commit()
                    return result
                } catch {
                    handle.driver.rollback()
                    guard error.connectionLost, !committing, attempt == 1 else { throw error }
                }
            }
        }
    }

    /// Runs a statement that returns no rows.
    /// - Returns: the rows it inserted, updated or deleted.
    @discardableResult
    public func execute(_ sql: String, _ bindings: [SQLValue] = []) throws(StorageError) -> Int {
        try connection.withLock { (handle: inout DatabaseConnection) throws(StorageError) -> Int in
            try handle.execute(sql, bindings)
        }
    }

    /// Runs a statement and returns its rows.
    public func query(_ sql: String, _ bindings: [SQLValue] = []) throws(StorageError) -> [[SQLValue]] {
        try connection.withLock { (handle: inout DatabaseConnection) throws(StorageError) -> [[SQLValue]] in
            try handle.query(sql, bindings)
        }
    }
}

/// The connection inside a transaction, only ever used under `Database`'s lock (`@unchecked
/// Sendable` for that reason: the lock, not the type, keeps threads apart).
public struct DatabaseConnection: ~Copyable, @unchecked Sendable {
    let driver: any SQLDriver

    init(_ driver: any SQLDriver) {
        self.driver = driver
    }

    /// Which engine runs the statements, for the rare statement that must differ.
    public var dialect: SQLDialect { driver.dialect }

    /// Runs a statement; returns the rows it inserted, updated or deleted.
    @discardableResult
    public func execute(_ sql: String, _ bindings: [SQLValue] = []) throws(StorageError) -> Int {
        try driver.execute(sql, bindings)
    }

    /// Runs a statement that runs once (a migration step): never kept prepared.
    public func executeOnce(_ sql: String) throws(StorageError) {
        try driver.executeOnce(sql)
    }

    /// Runs a statement and returns its rows.
    public func query(_ sql: String, _ bindings: [SQLValue] = []) throws(StorageError) -> [[SQLValue]] {
        try driver.query(sql, bindings)
    }
}
