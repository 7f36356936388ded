/// One polled room's health: consecutive failures, when to poll next, and whether it is online.
/// A value type with times passed in, so the failure rules are tested without a network.
public struct PollSchedule: Sendable, Equatable {
    public var interval: Double
    public var maxBackoff: Double
    public var failuresBeforeOffline: Int

    public private(set) var consecutiveFailures = 0
    public private(set) var isOnline = true
    /// What the last failure was, to log only when it changes.
    public private(set) var lastProblem: String?
    public private(set) var nextPoll: Double

    public init(interval: Double, maxBackoff: Double, failuresBeforeOffline: Int, firstPoll: Double) {
        self.interval = interval
        self.maxBackoff = maxBackoff
        self.failuresBeforeOffline = failuresBeforeOffline
        nextPoll = firstPoll
    }

    /// What changed with a poll's outcome, for the log and the availability topic.
    public struct Change: Sendable, Equatable {
        /// The room went offline or came back online.
        public var availabilityChanged = false
        /// The outcome differs from the previous one (first failure, another failure, recovery):
        /// worth one log line.
        public var worthLogging = false
    }

    /// A poll that started at `start` succeeded.
    public mutating func succeeded(start: Double) -> Change {
        var change = Change()
        change.worthLogging = consecutiveFailures > 0
        change.availabilityChanged = !isOnline
        consecutiveFailures = 0
        isOnline = true
        lastProblem = nil
        // From the planned time, not the start: waiting for a free request slot must not push every
        // later poll back. A poll that started more than an interval late doesn't cause a burst.
        nextPoll = max(nextPoll + interval, start)
        return change
    }

    /// A poll that started at `start` failed; the wait before the next one doubles with each
    /// consecutive failure, up to `maxBackoff`.
    public mutating func failed(start: Double, problem: String) -> Change {
        var change = Change()
        consecutiveFailures += 1
        change.worthLogging = problem != lastProblem
        lastProblem = problem
        if isOnline, consecutiveFailures >= failuresBeforeOffline {
            isOnline = false
            change.availabilityChanged = true
        }
        let exponent = min(consecutiveFailures - 1, 30)
        nextPoll = start + min(max(interval, 0.001) * Double(1 << exponent), max(maxBackoff, interval))
        return change
    }
}
