/// One entry of the security log (README "Security log"): logins, logouts and throttled attempts,
/// with who and from where, never a password or a token.
public struct SecurityEvent: Sendable, Equatable {
    /// `login`, `logout`, `logout_everywhere`, or `events` (a stream refused with 429).
    public var action: String
    /// The username given (login) or the user id (logout).
    public var user: String
    /// The client address (after `http.trusted_proxies`).
    public var address: String
    /// `granted`, `denied` or `throttled` for logins, `ok` for logouts, `throttled` for streams.
    public var outcome: String

    public init(action: String, user: String, address: String, outcome: String) {
        self.action = action
        self.user = user
        self.address = address
        self.outcome = outcome
    }

    /// Whether the event is worth a warning rather than an info line.
    public var isWarning: Bool { outcome == "denied" || outcome == "throttled" }
}
