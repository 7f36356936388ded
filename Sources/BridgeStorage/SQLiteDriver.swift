import CSQLite

/// The SQLite driver: one database file, every statement prepared with bound parameters.
/// Statements are prepared once per connection and reused (`StatementCache`); those that run once
/// (set-up pragmas, migrations) go through `executeOnce`, so they don't take a place in the cache.
final class SQLiteDriver: SQLDriver {
    let raw: OpaquePointer
    /// Enough for every statement the bridge's stores run; see `StatementCache`.
    private let cache = StatementCache(capacity: 64)

    var dialect: SQLDialect { .sqlite }

    /// Opens (creating if needed) the file at `path` in WAL mode.
    init(path: String) throws(StorageError) {
        var raw: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &raw, flags, nil)
        guard rc == SQLITE_OK, let raw else {
            let message = raw.map { String(cString: sqlite3_errmsg($0)) }
            sqlite3_close(raw)
            throw StorageError("open \(path)", code: rc, message: message)
        }
        self.raw = raw
        // WAL lets readers and the writer overlap; NORMAL sync is durable against process crashes
        // (a SIGKILLed bridge loses nothing committed), which is the failure a home bridge sees.
        for pragma in ["journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON", "busy_timeout = 5000"] {
            try executeOnce("PRAGMA \(pragma)")
        }
    }

    deinit {
        cache.finalizeAll()
        sqlite3_close_v2(raw)
    }

    /// SQLite copies bound text at once (`SQLITE_TRANSIENT`), so Swift strings may go away after binding.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func execute(_ sql: String, _ bindings: [SQLValue]) throws(StorageError) -> Int {
        _ = try query(sql, bindings)
        return Int(sqlite3_changes(raw))
    }

    func executeOnce(_ sql: String) throws(StorageError) {
        let statement = try prepare(sql, flags: 0)
        defer { sqlite3_finalize(statement) }
        _ = try run(statement, sql: sql, bindings: [])
    }

    func begin() throws(StorageError) { _ = try execute("BEGIN IMMEDIATE", []) }
    func commit() throws(StorageError) { _ = try execute("COMMIT", []) }
    func rollback() { _ = try? execute("ROLLBACK", []) }

    func schemaVersion() throws(StorageError) -> Int {
        Int(try query("PRAGMA user_version", []).first?.first?.integer ?? 0)
    }

    /// `BEGIN IMMEDIATE` already holds the file's write lock.
    func lockSchema() throws(StorageError) {}

    func setSchemaVersion(_ version: Int) throws(StorageError) {
        try executeOnce("PRAGMA user_version = \(version)")
    }

    /// The statement is prepared on its first run and kept for later ones (reset and its bindings
    /// cleared after every run, failed or not).
    func query(_ sql: String, _ bindings: [SQLValue]) throws(StorageError) -> [[SQLValue]] {
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
            case .text(let text): rc = sqlite3_bind_text(statement, position, text, -1, SQLiteDriver.transient)
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
