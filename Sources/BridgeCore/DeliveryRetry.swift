import Foundation

/// When a failed delivery is tried again (README "Notifications"): a pure rule, like the MQTT
/// reconnect backoff: `attempts` in all, waiting `initial`, then twice as long each time up to `maximum`.
public struct DeliveryRetry: Sendable, Equatable {
    public var attempts: Int
    public var initial: TimeInterval
    public var maximum: TimeInterval

    public init(attempts: Int, initial: TimeInterval, maximum: TimeInterval) {
        self.attempts = attempts
        self.initial = initial
        self.maximum = maximum
    }

    /// The wait before attempt `attempt + 1` after attempt `attempt` (1-based) failed; `nil`: give up.
    public func delay(afterFailedAttempt attempt: Int) -> TimeInterval? {
        guard attempt < attempts else { return nil }
        return min(maximum, initial * pow(2, Double(attempt - 1)))
    }
}
