import BridgeCore
import Foundation
import Synchronization

/// The per-user rate limit of light commands and the log of the commands it drops and the ones the
/// command path rejects, summarised: one full line for the first of a user and reason, then one
/// line per `summaryInterval` with the count (README "Security model", "Command rate").
/// Called from the MQTT thread and libmicrohttpd's threads; one lock for both values.
final class CommandGate: Sendable {
    /// Seconds a summary covers.
    static let summaryInterval = 10.0

    private struct State {
        var limit: CommandRateLimit
        var lines: RepeatedLines
    }

    private let state: Mutex<State>
    private let logger: Logger
    /// Seconds from a fixed start; monotonic, so a changed wall clock neither refills nor drains.
    private let clock: @Sendable () -> Double

    init(rate: Double, burst: Int, logger: Logger,
         clock: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        state = Mutex(State(limit: CommandRateLimit(rate: rate, burst: Double(burst)),
                            lines: RepeatedLines(interval: Self.summaryInterval)))
        self.logger = logger
        self.clock = clock
    }

    /// Whether a light command of `user` may go ahead; a refused one is logged (summarised) here.
    func admit(user: String, source: String) -> CommandRateLimit.Decision {
        let now = clock()
        let (decision, logged) = state.withLock { state in
            let decision = state.limit.admit(user: user, at: now)
            guard case .refused = decision else { return (decision, false) }
            return (decision, state.lines.record(.init(subject: user, reason: "rate_limited"), at: now) != nil)
        }
        if logged, case .refused(let wait) = decision {
            logger.warning("light command dropped: over the rate limit; more are counted and summarised every "
                + "\(Int(Self.summaryInterval)) s", ["user": user, "source": source,
                                                     "retry_in_s": String(format: "%.1f", wait)])
        }
        return decision
    }

    /// A command the command path rejected: logged in full when it is the first of its user and
    /// reason in an interval, else only counted.
    func logRejection(user: String, reason: String, message: String = "command rejected",
                      _ metadata: KeyValuePairs<String, String>) {
        let now = clock()
        guard state.withLock({ $0.lines.record(.init(subject: user, reason: reason), at: now) }) != nil else { return }
        logger.warning(message, metadata)
    }

    /// Logs the summaries of the intervals that have ended; `run` calls it every second.
    func flushSummaries() {
        let now = clock()
        for summary in state.withLock({ $0.lines.due(at: now) }) {
            let count = RepeatedLines.grouped(summary.count)
            let seconds = Int(summary.seconds)
            if summary.key.reason == "rate_limited" {
                logger.warning("dropped \(count) light commands for user \(summary.key.subject) over the rate limit "
                    + "in the last \(seconds) s")
            } else {
                logger.warning("rejected \(count) commands in the last \(seconds) s",
                               ["user": summary.key.subject, "reason": summary.key.reason])
            }
        }
    }

    /// Users with a rate-limit bucket that is not full, and (user, reason) pairs being summarised.
    var tracked: (users: Int, summaries: Int) {
        state.withLock { ($0.limit.trackedUsers, $0.lines.openKeys) }
    }
}
