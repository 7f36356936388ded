/// Slows down password guessing (README "Security model"), as a value type with
/// the clock passed in, so it is tested without waiting.
///
/// - Per username: past a few free failures, each failure blocks that name for a delay that doubles
///   (429 with `Retry-After`).
/// - Per client address (an IPv6 /64 counts as one): the same with more free failures, but it only
///   holds back attempts for unknown usernames and for users who have failures of their own. A
///   correct password of a user with no failures is never blocked by its address, so one guesser
///   behind a shared NAT address doesn't lock the household out.
/// - Globally: at most `maxConcurrentChecks` password checks at once and `checksPerSecond` on
///   average (each argon2id check takes 64 MiB and a core for ~0.1 s), whatever the addresses.
///
/// Checks are reserved before they run (`reserve`) and settled after (`finish`), under one lock in
/// `LoginGate`, so parallel attempts count as the failures they may become: 40 at once get exactly
/// as many checks as 40 in a row.
public struct LoginThrottle: Sendable {
    public struct Policy: Sendable {
        /// Failures for one username before attempts are delayed.
        public var freeFailuresPerUser = 3
        /// Failures from one address before attempts for unknown or already failing names are delayed.
        public var freeFailuresPerAddress = 20
        /// The first delay in seconds; each further failure doubles it, up to `maxDelay`.
        public var baseDelay = 1.0
        public var maxDelay = 900.0
        /// Seconds without failures after which a key starts afresh.
        public var forgetAfter = 3600.0
        /// Keys remembered at most. Old unblocked ones are dropped first; blocked ones never are, so
        /// when every entry is blocked, attempts needing a new one wait (429) instead.
        public var maxEntries = 10_000
        /// Password checks running at once, all clients together.
        public var maxConcurrentChecks = 4
        /// Password checks per second on average, all clients together, with bursts up to `checkBurst`.
        public var checksPerSecond = 10.0
        public var checkBurst = 20.0

        public init() {}
    }

    /// What `reserve` decided.
    public enum Decision: Sendable, Equatable {
        /// Check the password, then call `finish` with this ticket.
        case check(Ticket)
        /// Don't check: try again after this many seconds.
        case throttled(retryAfter: Double)
    }

    /// A reserved check: which keys it counts against.
    public struct Ticket: Sendable, Equatable {
        let userKey: String
        let addressKey: String
    }

    private struct Entry: Sendable {
        var failures = 0
        var inFlight = 0
        var blockedUntil = 0.0
        var lastFailure = 0.0
    }

    public var policy: Policy
    private var entries: [String: Entry] = [:]
    private var checksInFlight = 0
    private var budget: TokenBucket

    public init(policy: Policy = Policy()) {
        self.policy = policy
        budget = TokenBucket(rate: policy.checksPerSecond, burst: policy.checkBurst)
    }

    /// Password checks reserved and not finished (for tests).
    public var inFlight: Int { checksInFlight }

    static func userKey(_ username: String) -> String { "user:" + username.lowercased() }
    static func addressKey(_ address: String) -> String { "addr:" + ClientAddress.throttleKey(address) }

    /// Decides whether a password check may run now, and if so reserves it.
    /// - Parameter knownUser: whether the username is configured (an unknown one can't be a correct login).
    public mutating func reserve(username: String, address: String, knownUser: Bool, now: Double) -> Decision {
        let userKey = Self.userKey(username)
        let addressKey = Self.addressKey(address)
        let user = current(userKey, now: now)
        if let wait = blocked(user, free: policy.freeFailuresPerUser, now: now) { return .throttled(retryAfter: wait) }
        // The address holds back only attempts that can't be a clean user's correct password.
        if !knownUser || user.failures + user.inFlight > 0,
           let wait = blocked(current(addressKey, now: now), free: policy.freeFailuresPerAddress, now: now) {
            return .throttled(retryAfter: wait)
        }
        budget.refill(at: now)
        guard checksInFlight < policy.maxConcurrentChecks, budget.tokens >= 1 else {
            return .throttled(retryAfter: max(1, budget.waitForOne))
        }
        let newKeys = [userKey, addressKey].filter { entries[$0] == nil }.count
        if entries.count + newKeys > policy.maxEntries {
            prune(now: now)
            guard entries.count + newKeys <= policy.maxEntries else { return .throttled(retryAfter: 60) }
        }
        budget.spend()
        checksInFlight += 1
        entries[userKey, default: Entry()].inFlight += 1
        entries[addressKey, default: Entry()].inFlight += 1
        return .check(Ticket(userKey: userKey, addressKey: addressKey))
    }

    /// Settles a reserved check. A good login clears its username's failures; the address keeps its
    /// count, so one valid account can't be used to reset guessing at others from the same address.
    public mutating func finish(_ ticket: Ticket, succeeded: Bool, now: Double) {
        checksInFlight = max(0, checksInFlight - 1)
        for key in [ticket.userKey, ticket.addressKey] {
            if let entry = entries[key] { entries[key]?.inFlight = max(0, entry.inFlight - 1) }
        }
        if succeeded {
            entries[ticket.userKey]?.failures = 0
            entries[ticket.userKey]?.blockedUntil = 0
        } else {
            bump(ticket.userKey, free: policy.freeFailuresPerUser, now: now)
            bump(ticket.addressKey, free: policy.freeFailuresPerAddress, now: now)
        }
        for key in [ticket.userKey, ticket.addressKey] where entries[key].map(isIdle) == true {
            entries[key] = nil
        }
    }

    /// Seconds to wait, or nil: blocked until a time, or checks in flight that would block this one
    /// if they all failed (each may become one more failure).
    private func blocked(_ entry: Entry, free: Int, now: Double) -> Double? {
        if entry.blockedUntil > now { return entry.blockedUntil - now }
        return entry.inFlight > 0 && entry.failures + entry.inFlight > free ? 1 : nil
    }

    /// The entry for `key` as it stands now: forgotten after `forgetAfter` without failures.
    private func current(_ key: String, now: Double) -> Entry {
        guard var entry = entries[key] else { return Entry() }
        if entry.blockedUntil <= now && now - entry.lastFailure > policy.forgetAfter {
            entry.failures = 0
        }
        return entry
    }

    private func isIdle(_ entry: Entry) -> Bool {
        entry.failures == 0 && entry.inFlight == 0
    }

    private mutating func bump(_ key: String, free: Int, now: Double) {
        var entry = entries[key] ?? Entry()
        if entry.blockedUntil <= now && now - entry.lastFailure > policy.forgetAfter { entry.failures = 0 }
        entry.failures += 1
        entry.lastFailure = now
        if entry.failures > free {
            let exponent = min(entry.failures - free - 1, 30)
            let delay = min(policy.baseDelay * Double(1 << exponent), policy.maxDelay)
            entry.blockedUntil = now + delay
        }
        entries[key] = entry
    }

    /// Drops forgotten entries, then the oldest that are neither blocked nor in use; never a blocked one.
    private mutating func prune(now: Double) {
        let removable = { (entry: Entry) in entry.blockedUntil <= now && entry.inFlight == 0 }
        entries = entries.filter { !removable($0.value) || now - $0.value.lastFailure <= policy.forgetAfter }
        guard entries.count > policy.maxEntries / 2 else { return }
        let oldest = entries.filter { removable($0.value) }.sorted { $0.value.lastFailure < $1.value.lastFailure }
        for (key, _) in oldest.prefix(entries.count - policy.maxEntries / 2) { entries[key] = nil }
    }
}
