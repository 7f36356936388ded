import CSQLite

/// The prepared statements of one connection, by SQL text, so a statement the bridge runs often
/// (a history insert, a session lookup) is parsed once rather than on every run.
///
/// Bounded: past `capacity` distinct texts, further ones are prepared and finalized per run, so
/// SQL built from values can never grow the cache without limit. Only used under `Database`'s
/// lock, like the connection that owns it.
final class StatementCache {
    let capacity: Int
    private var statements: [String: OpaquePointer] = [:]

    init(capacity: Int) {
        self.capacity = capacity
    }

    var count: Int { statements.count }

    /// The cached statement for `sql`, if there is one.
    func statement(for sql: String) -> OpaquePointer? {
        statements[sql]
    }

    /// Keeps `statement` for later runs of `sql`; returns false when the cache is full (the caller
    /// then finalizes it after use).
    func keep(_ statement: OpaquePointer, for sql: String) -> Bool {
        guard statements.count < capacity else { return false }
        statements[sql] = statement
        return true
    }

    /// Finalizes every statement; must run before the connection closes.
    func finalizeAll() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
    }
}
