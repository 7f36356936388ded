import CSQLite

/// A storage call that failed, with the engine's own message.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    /// SQLite's result code (`SQLITE_*`); `SQLITE_ERROR` for PostgreSQL's errors.
    public var code: Int32
    public var message: String
    /// What the bridge was doing (`open`, `migrate to version 1`, ...).
    public var context: String
    /// PostgreSQL's SQLSTATE (`23505` for a duplicate key, ...); nil on SQLite.
    public var sqlState: String?
    /// The connection to the server was lost (PostgreSQL); the statement may be run again once reconnected.
    public var connectionLost = false

    init(_ context: String, code: Int32, message: String? = nil) {
        self.context = context
        self.code = code
        self.message = message ?? String(cString: sqlite3_errstr(code))
    }

    init(postgres context: String, message: String, sqlState: String?, connectionLost: Bool = false) {
        self.context = context
        self.code = SQLITE_ERROR
        self.message = message
        self.sqlState = sqlState
        self.connectionLost = connectionLost
    }

    public var description: String {
        guard sqlState != nil || connectionLost else { return "\(context): \(message) (SQLite code \(code))" }
        return "\(context): \(message) (PostgreSQL \(sqlState.map { "SQLSTATE \($0)" } ?? "connection lost"))"
    }
}
