import Foundation

/// API sessions: only a hash of each token is stored, with its user and expiry, so a copy of the
/// database file does not hand out working tokens.
public struct SessionStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    public func create(tokenHash: String, userID: String, now: Date, expiresAt: Date) throws(StorageError) {
        try database.execute(
            "INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
            [.text(tokenHash), .text(userID), .real(now.timeIntervalSince1970), .real(expiresAt.timeIntervalSince1970)]
        )
    }

    /// The user of a session that exists and has not expired.
    public func userID(tokenHash: String, now: Date) throws(StorageError) -> String? {
        try database.query(
            "SELECT user_id FROM sessions WHERE token_hash = ? AND expires_at > ?",
            [.text(tokenHash), .real(now.timeIntervalSince1970)]
        ).first?.first?.text
    }

    /// Ends a session; returns whether there was one.
    @discardableResult
    public func revoke(tokenHash: String) throws(StorageError) -> Bool {
        try database.execute("DELETE FROM sessions WHERE token_hash = ?", [.text(tokenHash)]) > 0
    }

    /// Deletes expired sessions; returns how many.
    @discardableResult
    public func purgeExpired(now: Date) throws(StorageError) -> Int {
        try database.execute("DELETE FROM sessions WHERE expires_at <= ?", [.real(now.timeIntervalSince1970)])
    }
}
