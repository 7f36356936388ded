/// Decides which readings go out: a value is published when it differs from the last one
/// published on its topic, or when `refresh` has passed since then (README, "MQTT").
public struct PublishTracker: Sendable {
    private struct Last: Sendable {
        var payload: String
        var time: Double
    }

    public var refresh: Double
    private var last: [String: Last] = [:]

    /// - Parameter refresh: seconds after which an unchanged value is published again.
    public init(refresh: Double) {
        self.refresh = refresh
    }

    /// Whether `payload` should be published on `topic` at `now` (seconds on a monotonic clock);
    /// when it should, it is remembered as published.
    public mutating func shouldPublish(topic: String, payload: String, now: Double) -> Bool {
        if let previous = last[topic], previous.payload == payload, now - previous.time < refresh {
            return false
        }
        last[topic] = Last(payload: payload, time: now)
        return true
    }

    /// Remembers a payload published for another reason (a full republish after connecting).
    public mutating func markPublished(topic: String, payload: String, now: Double) {
        last[topic] = Last(payload: payload, time: now)
    }

    /// Forgets a topic whose retained message was cleared (a room or sensor that went), so the
    /// tracker holds only topics the home still has.
    public mutating func forget(topic: String) {
        last[topic] = nil
    }
}
