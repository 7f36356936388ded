/// A token bucket: `burst` tokens at most, refilled at `rate` a second; each admitted action takes
/// one. Time is a number of seconds from any fixed start, given by the caller, so the value can be
/// driven by a test clock.
public struct TokenBucket: Sendable, Equatable {
    public let rate: Double
    public let burst: Double
    public private(set) var tokens: Double
    private var updatedAt: Double?

    /// A full bucket.
    public init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
        tokens = burst
    }

    /// Adds what `rate` gave since the last call, up to `burst`.
    public mutating func refill(at now: Double) {
        if let updatedAt { tokens = min(burst, tokens + max(0, now - updatedAt) * rate) }
        updatedAt = max(updatedAt ?? now, now)
    }

    /// Seconds until a whole token is there (0 when one is), as of the last `refill`.
    public var waitForOne: Double { tokens >= 1 ? 0 : (1 - tokens) / max(rate, 0.000_001) }

    /// Takes a token counted by the caller (after `refill`, with `tokens >= 1`).
    public mutating func spend() { tokens -= 1 }

    /// Refills, then takes a token if a whole one is there.
    public mutating func take(at now: Double) -> Bool {
        refill(at: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Whether the bucket is as a new one would be (so forgetting it changes nothing).
    public var isFull: Bool { tokens >= burst }
}

/// Light commands per user (README "Security model", `commands.rate` and `commands.burst`): each
/// user has a bucket of their own. Buckets are kept only for users that sent a command and are not
/// full again, so at most one per configured user (callers admit only resolved users).
public struct CommandRateLimit: Sendable {
    public enum Decision: Sendable, Equatable {
        case admitted
        /// Refused: a token is there again after this many seconds.
        case refused(retryAfter: Double)
    }

    public let rate: Double
    public let burst: Double
    private var buckets: [String: TokenBucket] = [:]
    /// Full buckets are forgotten at most once a second, and only past 64 users.
    private var nextPrune = -Double.infinity

    public init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }

    /// Users with a bucket that is not full.
    public var trackedUsers: Int { buckets.count }

    public mutating func admit(user: String, at now: Double) -> Decision {
        var bucket = buckets[user] ?? TokenBucket(rate: rate, burst: burst)
        let taken = bucket.take(at: now)
        buckets[user] = bucket
        if buckets.count > 64, now >= nextPrune {
            forgetFull(at: now)
            nextPrune = now + 1
        }
        return taken ? .admitted : .refused(retryAfter: bucket.waitForOne)
    }

    private mutating func forgetFull(at now: Double) {
        for (user, var bucket) in buckets {
            bucket.refill(at: now)
            buckets[user] = bucket.isFull ? nil : bucket
        }
    }
}
