import CSQLite

/// A SQLite call that failed, with SQLite's own message.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    /// SQLite's result code (`SQLITE_*`).
    public var code: Int32
    public var message: String
    /// What the bridge was doing (`open`, `migrate to version 1`, ...).
    public var context: String

    init(_ context: String, code: Int32, message: String? = nil) {
        self.context = context
        self.code = code
        self.message = message ?? String(cString: sqlite3_errstr(code))
    }

    public var description: String { "\(context): \(message) (SQLite code \(code))" }
}
