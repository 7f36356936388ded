/// Turns a flood of the same log line into one line per interval (README "Security model",
/// "Repeated log lines"): the first occurrence of a (subject, reason) pair is logged in full, the
/// rest are only counted, and when the interval since that first one has passed, one summary says
/// how many there were in all. Time is seconds from any fixed start, given by the caller.
public struct RepeatedLines: Sendable {
    /// What repeats: who (a user id, or `others` once `maxKeys` are open) and why.
    public struct Key: Hashable, Sendable {
        public var subject: String
        public var reason: String

        public init(subject: String, reason: String) {
            self.subject = subject
            self.reason = reason
        }
    }

    /// An interval that ended with more than the one line logged in full.
    public struct Summary: Sendable, Equatable {
        public var key: Key
        /// Every occurrence in the interval, the first (logged in full) included.
        public var count: Int
        public var seconds: Double
    }

    /// The subject counted for new keys when `maxKeys` are already open, so that subjects an
    /// attacker makes up (a user id in a topic) can't grow this table.
    public static let othersSubject = "others"

    public let interval: Double
    public let maxKeys: Int
    private var open: [Key: (since: Double, count: Int)] = [:]

    public init(interval: Double, maxKeys: Int = 1_000) {
        self.interval = interval
        self.maxKeys = maxKeys
    }

    /// Keys with an interval open (for tests and bounds).
    public var openKeys: Int { open.count }

    /// Counts one occurrence; returns the key to log it under in full, or `nil` when it is only counted.
    public mutating func record(_ key: Key, at now: Double) -> Key? {
        var key = key
        if open[key] == nil, open.count >= maxKeys { key.subject = Self.othersSubject }
        if let entry = open[key] {
            open[key] = (entry.since, entry.count + 1)
            return nil
        }
        open[key] = (now, 1)
        return key
    }

    /// Closes the intervals that have ended by `now`; returns those with repeats, oldest first.
    public mutating func due(at now: Double) -> [Summary] {
        let ended = open.filter { now - $0.value.since >= interval }
        for key in ended.keys { open[key] = nil }
        return ended.filter { $0.value.count > 1 }
            .sorted { ($0.value.since, $0.key.subject, $0.key.reason) < ($1.value.since, $1.key.subject, $1.key.reason) }
            .map { Summary(key: $0.key, count: $0.value.count, seconds: interval) }
    }

    /// `19980` as `19,980`, as the summaries write counts.
    public static func grouped(_ count: Int) -> String {
        let digits = String(count.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return (count < 0 ? "-" : "") + result
    }
}
