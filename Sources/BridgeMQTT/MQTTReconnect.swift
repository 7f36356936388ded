/// How long to wait before the next connection attempt: capped exponential backoff with jitter.
///
/// After `failures` consecutive failures (a lost connection counts as one) the nominal delay is
/// `minimum × 2^(failures − 1)`, capped at `maximum`; the actual delay is 80–100 % of it, so
/// clients that lost the same broker at the same moment do not all come back in step, and the
/// delay never exceeds `maximum`.
public struct ReconnectBackoff: Sendable, Equatable {
    public var minimum: Double
    public var maximum: Double
    /// The largest fraction taken off the nominal delay.
    public static let jitter = 0.2

    public init(minimum: Double, maximum: Double) {
        self.minimum = max(0.01, minimum)
        self.maximum = max(self.minimum, maximum)
    }

    /// The nominal (un-jittered) delay after `failures` consecutive failures (at least 1).
    public func nominalDelay(afterFailures failures: Int) -> Double {
        let exponent = Double(min(max(failures, 1) - 1, 60))
        return min(maximum, minimum * pow2(exponent))
    }

    /// The delay after `failures` consecutive failures, with `random` in 0..<1 choosing the jitter.
    public func delay(afterFailures failures: Int, random: Double) -> Double {
        nominalDelay(afterFailures: failures) * (1 - ReconnectBackoff.jitter * min(max(random, 0), 1))
    }

    private func pow2(_ exponent: Double) -> Double {
        var value = 1.0
        var remaining = Int(exponent)
        while remaining > 0, value < 1e18 {
            value *= 2
            remaining -= 1
        }
        return value
    }
}

/// Recognises QoS 1 messages the broker sends again after a reconnect (MQTT 3.1.1 §4.4: with a
/// persistent session, unacknowledged messages are re-sent first, with their original packet ids).
///
/// libmosquitto acknowledges a message before the application sees it, but the acknowledgement
/// may be lost with the connection; the broker then re-sends a message the application has already
/// handled. The packet ids of the last messages handled on a connection become suspects when it
/// drops. If the next connection resumes the session, messages that arrive carrying a suspect id
/// before the first one that doesn't are re-sends. Anything else (a fresh session, a new id)
/// closes the window, so an id the broker reuses later is never mistaken for a re-send.
struct RedeliveryFilter {
    /// How many recent packet ids are remembered per connection; a broker has at most its
    /// inflight window (mosquitto: 20) unacknowledged at once.
    static let remembered = 256

    private var recent: [Int] = []
    private var suspects: Set<Int> = []
    private var windowOpen = false

    /// A connection that had been accepted ended.
    mutating func connectionLost() {
        if windowOpen {
            suspects.formUnion(recent)
        } else {
            suspects = Set(recent)
        }
        recent.removeAll(keepingCapacity: true)
        windowOpen = false
    }

    /// The broker accepted a connection; `sessionPresent` from its CONNACK.
    mutating func connected(sessionPresent: Bool) {
        if !sessionPresent { suspects.removeAll() }
        recent.removeAll(keepingCapacity: true)
        windowOpen = !suspects.isEmpty
    }

    /// Whether a received message is a re-send of one already handled; remembers its id.
    mutating func isRedelivery(messageID: Int, qos: Int) -> Bool {
        guard qos > 0 else { return false }
        defer {
            recent.append(messageID)
            if recent.count > RedeliveryFilter.remembered { recent.removeFirst(recent.count - RedeliveryFilter.remembered) }
        }
        guard windowOpen else { return false }
        if suspects.remove(messageID) != nil {
            if suspects.isEmpty { windowOpen = false }
            return true
        }
        windowOpen = false
        suspects.removeAll()
        return false
    }
}

/// Notices a client id that another client keeps taking over (README, "MQTT", client ids).
///
/// An MQTT 3.1.1 broker that accepts a second connection with a client id closes the first one
/// without saying why (mosquitto's log has "already connected, closing old connection"; MQTT 5
/// would send the reason "session taken over"). Seen from the client, that is a connection the
/// broker accepted and then lost soon after, again and again while the other client reconnects.
/// `threshold` such drops in a row, with no connection lasting the stable period in between, make
/// the suspicion worth a line in the log.
public struct TakeoverWatch: Sendable, Equatable {
    public static let threshold = 3
    public let stablePeriod: Double
    /// Accepted connections lost before `stablePeriod`, in a row.
    public private(set) var quickDrops = 0

    public init(stablePeriod: Double) {
        self.stablePeriod = stablePeriod
    }

    /// An accepted connection was lost after `connectedFor` seconds. Returns what to add to the
    /// disconnect's reason when the drops look like a takeover of `clientID`, else nil.
    public mutating func lost(after connectedFor: Double, clientID: String) -> String? {
        guard connectedFor < stablePeriod else {
            quickDrops = 0
            return nil
        }
        quickDrops += 1
        guard quickDrops >= Self.threshold else { return nil }
        return "\(quickDrops) connections in a row lost within \(Int(stablePeriod)) s of being accepted: "
            + "another client may be connecting with client id \(clientID), which makes the broker "
            + "close this one (set mqtt.client_id to an id only the bridge uses)"
    }
}
