/// Revoked API sessions by id, until the expiry of their token: after that the token is dead
/// anyway and the row can go.
public struct RevocationStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Records a revocation; revoking twice is not an error.
    public func add(id: String, expiresAt: Int64) throws(StorageError) {
        try database.execute("INSERT INTO revoked_sessions (id, expires_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                             [.text(id), .integer(expiresAt)])
    }

    /// Whether the session `id` is revoked and its token not yet expired at `now` (Unix seconds).
    public func isRevoked(id: String, now: Int64) throws(StorageError) -> Bool {
        !(try database.query("SELECT 1 FROM revoked_sessions WHERE id = ? AND expires_at > ?", [.text(id), .integer(now)])
            .isEmpty)
    }

    /// Every revocation whose token has not expired at `now` (Unix seconds).
    public func live(now: Int64) throws(StorageError) -> [(id: String, expiresAt: Int64)] {
        try database.query("SELECT id, expires_at FROM revoked_sessions WHERE expires_at > ?", [.integer(now)])
            .compactMap { row in
                guard row.count == 2, let id = row[0].text, let expiry = row[1].integer else { return nil }
                return (id, expiry)
            }
    }

    /// Deletes revocations of tokens expired at `now`; returns how many.
    @discardableResult
    public func purgeExpired(now: Int64) throws(StorageError) -> Int {
        try database.execute("DELETE FROM revoked_sessions WHERE expires_at <= ?", [.integer(now)])
    }
}
