import Synchronization

/// Every password check the bridge makes goes through here: the throttle first, then the hash.
/// Shared by the legacy `/login` route and `POST /api/v1/login`, so both are throttled alike.
public final class LoginGate: Sendable {
    public enum Outcome: Sendable, Equatable {
        case granted(User)
        case denied
        /// Too many failures: try again after this many seconds.
        case throttled(retryAfter: Int)
    }

    private let throttle: Mutex<LoginThrottle>
    private let verifyPassword: @Sendable (_ password: String, _ hash: String?) -> Bool
    private let now: @Sendable () -> Double
    private let record: @Sendable (SecurityEvent) -> Void

    /// - Parameters:
    ///   - verifyPassword: checks a password against a user's hash; given `nil` for an unknown user,
    ///     it must take as long as for a known one (no user enumeration by timing).
    ///   - now: seconds on a monotonic clock.
    ///   - record: told of every attempt and its outcome (the security log), never the password.
    public init(
        policy: LoginThrottle.Policy = .init(),
        verifyPassword: @escaping @Sendable (String, String?) -> Bool,
        now: @escaping @Sendable () -> Double,
        record: @escaping @Sendable (SecurityEvent) -> Void = { _ in }
    ) {
        throttle = Mutex(LoginThrottle(policy: policy))
        self.verifyPassword = verifyPassword
        self.now = now
        self.record = record
    }

    public func attempt(username: String, password: String, address: String, in home: Home) -> Outcome {
        let user = home.user(username: username)
        let decision = throttle.withLock {
            $0.reserve(username: username, address: address, knownUser: user != nil, now: now())
        }
        guard case .check(let ticket) = decision else {
            if case .throttled(let wait) = decision {
                record(SecurityEvent(action: "login", user: username, address: address, outcome: "throttled"))
                return .throttled(retryAfter: max(1, Int(wait.rounded(.up))))
            }
            return .denied
        }
        let valid = verifyPassword(password, user?.passwordHash)
        throttle.withLock { $0.finish(ticket, succeeded: valid && user != nil, now: now()) }
        guard valid, let user else {
            record(SecurityEvent(action: "login", user: username, address: address, outcome: "denied"))
            return .denied
        }
        record(SecurityEvent(action: "login", user: username, address: address, outcome: "granted"))
        return .granted(user)
    }
}
