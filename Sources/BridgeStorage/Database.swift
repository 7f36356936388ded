import CSQLite
import Foundation
import Synchronization

/// A value bound to, or read from, a SQL statement.
public enum SQLValue: Sendable, Equatable {
    case text(String)
    case integer(Int64)
    case real(Double)
    case null

    public var text: String? { if case .text(let value) = self { value } else { nil } }
    public var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
    public var real: Double? {
        switch self {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }
}

/// One SQLite database file: opened in WAL mode, its schema brought up to date at open, every
/// statement prepared with bound parameters. Statements are prepared once per connection and
/// reused (`StatementCache`); those that run once (set-up pragmas, migrations) go through
/// `executeOnce`, so they don't take a place in the cache.
///
/// One connection serves the whole bridge; a `Mutex` serialises its use, because libmicrohttpd's
/// threads and async code both reach it.
public final class Database: Sendable {
    private let connection: Mutex<DatabaseConnection>
    public let path: String

    /// Opens (creating if needed, with its folder: 0700 and 0600, see `StorageFiles`) and migrates the database
    /// at `path`.
    public init(path: String, migrations: [Migration] = Migration.all) throws(StorageError) {
        self.path = path
        StorageFiles.prepare(path: path)
        var raw: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &raw, flags, nil)
        guard rc == SQLITE_OK, let raw else {
            let message = raw.map { String(cString: sqlite3_errmsg($0)) }
            sqlite3_close(raw)
            throw StorageError("open \(path)", code: rc, message: message)
        }
        connection = Mutex(DatabaseConnection(raw))
        // WAL lets readers and the writer overlap; NORMAL sync is durable against process crashes
        // (a SIGKILLed bridge loses nothing committed), which is the failure a home bridge sees.
        for pragma in ["journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON", "busy_timeout = 5000"] {
            try connection.withLock { (handle: inout DatabaseConnection) throws(StorageError) in
                try handle.executeOnce("PRAGMA \(pragma)")
            }
        }
        try migrate(migrations)
    }

    /// The schema version (`PRAGMA user_version`).
    public var schemaVersion: Int {
        (try? query("PRAGMA user_version").first?.first?.integer).flatMap { $0.map(Int.init) } ?? 0
    }

    private func migrate(_ migrations: [Migration]) throws(StorageError) {
        let current = schemaVersion
        for migration in migrations where migration.version > current {
            try transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
                for statement in migration.statements { try connection.executeOnce(statement) }
                try connection.executeOnce("PRAGMA user_version = \(migration.version)")
            }
        }
    }

    /// Runs `body` in one transaction, holding the connection for its whole length so no other
    /// thread's statement lands inside it: all of it is committed, or none of it.
    public func transaction<T>(_ body: (borrowing DatabaseConnection) throws(StorageError) -> T) throws(StorageError) -> T {
        try connection.withLock { (handle: inout DatabaseConnection) throws(StorageError) -> T in
            try handle.execute("BEGIN IMMEDIATE")
            do throws(StorageError) {
                let result = try body(handle)
                try handle.execute("COMMIT")
                return result
            } catch {
                _ = try? handle.execute("ROLLBACK")
                throw error
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

/// The raw connection, only ever used under `Database`'s lock (`@unchecked Sendable` for that
/// reason: the lock, not the type, keeps threads apart).
public struct DatabaseConnection: ~Copyable, @unchecked Sendable {
    let raw: OpaquePointer
    /// Enough for every statement the bridge's stores run; see `StatementCache`.
    private let cache = StatementCache(capacity: 64)

    init(_ raw: OpaquePointer) {
        self.raw = raw
    }

    deinit {
        cache.finalizeAll()
        sqlite3_close_v2(raw)
    }

    /// SQLite copies bound text at once (`SQLITE_TRANSIENT`), so Swift strings may go away after binding.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Runs a statement; returns the rows it inserted, updated or deleted.
    @discardableResult
    public func execute(_ sql: String, _ bindings: [SQLValue] = []) throws(StorageError) -> Int {
        _ = try query(sql, bindings)
        return Int(sqlite3_changes(raw))
    }

    /// Runs a statement that runs once (a migration step, a set-up pragma): prepared, run and
    /// finalized, never cached.
    public func executeOnce(_ sql: String) throws(StorageError) {
        let statement = try prepare(sql, flags: 0)
        defer { sqlite3_finalize(statement) }
        _ = try run(statement, sql: sql, bindings: [])
    }

    /// Runs a statement and returns its rows. The statement is prepared on its first run and kept
    /// for later ones (reset and its bindings cleared after every run, failed or not).
    public func query(_ sql: String, _ bindings: [SQLValue] = []) throws(StorageError) -> [[SQLValue]] {
        if let cached = cache.statement(for: sql) {
            return try runAndReset(cached, sql: sql, bindings: bindings)
        }
        let statement = try prepare(sql, flags: UInt32(SQLITE_PREPARE_PERSISTENT))
        guard cache.keep(statement, for: sql) else {
            defer { sqlite3_finalize(statement) }
            return try run(statement, sql: sql, bindings: bindings)
        }
        return try runAndReset(statement, sql: sql, bindings: bindings)
    }

    private func prepare(_ sql: String, flags: UInt32) throws(StorageError) -> OpaquePointer {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(raw, sql, -1, flags, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw StorageError("prepare \(sql.prefix(60))", code: rc, message: String(cString: sqlite3_errmsg(raw)))
        }
        return statement
    }

    /// Runs a kept statement and leaves it ready for the next run: reset (which also ends a read
    /// that stopped early) and with no bound values holding on to text.
    private func runAndReset(_ statement: OpaquePointer, sql: String, bindings: [SQLValue])
        throws(StorageError) -> [[SQLValue]]
    {
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        return try run(statement, sql: sql, bindings: bindings)
    }

    private func run(_ statement: OpaquePointer, sql: String, bindings: [SQLValue])
        throws(StorageError) -> [[SQLValue]]
    {
        for (index, value) in bindings.enumerated() {
            let position = Int32(index + 1)
            let rc: Int32
            switch value {
            case .text(let text): rc = sqlite3_bind_text(statement, position, text, -1, DatabaseConnection.transient)
            case .integer(let number): rc = sqlite3_bind_int64(statement, position, number)
            case .real(let number): rc = sqlite3_bind_double(statement, position, number)
            case .null: rc = sqlite3_bind_null(statement, position)
            }
            guard rc == SQLITE_OK else { throw StorageError("bind parameter \(position)", code: rc) }
        }
        var rows: [[SQLValue]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return rows }
            guard rc == SQLITE_ROW else {
                throw StorageError("run \(sql.prefix(60))", code: rc, message: String(cString: sqlite3_errmsg(raw)))
            }
            var row: [SQLValue] = []
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(statement, column)))
                case SQLITE_NULL: row.append(.null)
                default:
                    let text = sqlite3_column_text(statement, column).map { String(cString: $0) } ?? ""
                    row.append(.text(text))
                }
            }
            rows.append(row)
        }
    }
}
