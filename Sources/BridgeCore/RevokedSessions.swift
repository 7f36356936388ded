/// A session ended before its expiry: kept until then, and shared with the other instances so that
/// the token stops working everywhere.
public struct SessionRevocation: Sendable, Equatable, Hashable {
    /// `SessionClaims.idText`: 32 lowercase hex digits.
    public var id: String
    /// Unix seconds, the token's own expiry: after it the entry can be forgotten.
    public var expiresAt: Int64

    public init(id: String, expiresAt: Int64) {
        self.id = id
        self.expiresAt = expiresAt
    }

    /// Whether `id` has the form of a session id (for revocations that arrive from elsewhere).
    public var hasValidID: Bool {
        id.utf8.count == 2 * SessionClaims.idBytes
            && id.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }
}

/// The revoked sessions an instance knows of, in memory so that checking a token never reads the
/// database. Entries go when their token would have expired anyway.
public struct RevokedSessions: Sendable {
    private var expiries: [String: Int64] = [:]
    private var pruneAt = 1024

    public init() {}

    public var count: Int { expiries.count }

    /// Adds a revocation; returns whether it was new.
    @discardableResult
    public mutating func insert(_ revocation: SessionRevocation, now: Double) -> Bool {
        let isNew = expiries.updateValue(revocation.expiresAt, forKey: revocation.id) == nil
        // Pruning on a doubling schedule keeps inserts cheap on average however many logouts come.
        if expiries.count >= pruneAt {
            prune(now: now)
            pruneAt = max(1024, 2 * expiries.count)
        }
        return isNew
    }

    public func contains(id: String) -> Bool {
        expiries[id] != nil
    }

    public mutating func prune(now: Double) {
        expiries = expiries.filter { Double($0.value) > now }
    }
}
