/// Slows down password guessing: per username and per client address, each failure past a few
/// free ones blocks further attempts for a delay that doubles with every failure (a 429 with
/// `Retry-After`; README, "Security model"). A value type with the clock passed in, so it is tested
/// without waiting.
public struct LoginThrottle: Sendable {
    public struct Policy: Sendable {
        /// Failures for one username before attempts are delayed.
        public var freeFailuresPerUser = 3
        /// Failures from one address before attempts are delayed: higher, so one household behind
        /// one address can still log in while a single name is being guessed.
        public var freeFailuresPerAddress = 20
        /// The first delay in seconds; each further failure doubles it, up to `maxDelay`.
        public var baseDelay = 1.0
        public var maxDelay = 900.0
        /// Seconds without failures after which a key starts afresh.
        public var forgetAfter = 3600.0
        /// Keys remembered at most (old ones are dropped first), so a flood of names can't exhaust memory.
        public var maxEntries = 10_000

        public init() {}
    }

    private struct Entry: Sendable {
        var failures = 0
        var blockedUntil = 0.0
        var lastFailure = 0.0
    }

    public var policy: Policy
    private var entries: [String: Entry] = [:]

    public init(policy: Policy = Policy()) {
        self.policy = policy
    }

    private static func userKey(_ username: String) -> String { "user:" + username.lowercased() }
    private static func addressKey(_ address: String) -> String { "addr:" + address }

    /// Seconds to wait before trying again, or `nil` when an attempt may go ahead now.
    public func retryAfter(username: String, address: String, now: Double) -> Double? {
        let waits = [Self.userKey(username), Self.addressKey(address)].compactMap { key -> Double? in
            guard let entry = entries[key], entry.blockedUntil > now else { return nil }
            return entry.blockedUntil - now
        }
        return waits.max()
    }

    public mutating func recordFailure(username: String, address: String, now: Double) {
        bump(Self.userKey(username), free: policy.freeFailuresPerUser, now: now)
        bump(Self.addressKey(address), free: policy.freeFailuresPerAddress, now: now)
        if entries.count > policy.maxEntries { prune(now: now) }
    }

    /// A good login clears its username's failures. The address keeps its count, so one valid
    /// account can't be used to reset guessing at others from the same address.
    public mutating func recordSuccess(username: String, now: Double) {
        entries[Self.userKey(username)] = nil
    }

    private mutating func bump(_ key: String, free: Int, now: Double) {
        var entry = entries[key] ?? Entry()
        if now - entry.lastFailure > policy.forgetAfter { entry = Entry() }
        entry.failures += 1
        entry.lastFailure = now
        if entry.failures > free {
            let exponent = min(entry.failures - free - 1, 30)
            let delay = min(policy.baseDelay * Double(1 << exponent), policy.maxDelay)
            entry.blockedUntil = now + delay
        }
        entries[key] = entry
    }

    private mutating func prune(now: Double) {
        entries = entries.filter { now - $0.value.lastFailure <= policy.forgetAfter || $0.value.blockedUntil > now }
        if entries.count > policy.maxEntries {
            let newest = entries.sorted { $0.value.lastFailure > $1.value.lastFailure }.prefix(policy.maxEntries / 2)
            entries = Dictionary(uniqueKeysWithValues: newest.map { ($0.key, $0.value) })
        }
    }
}
