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

    /// - Parameters:
    ///   - verifyPassword: checks a password against a user's hash; given `nil` for an unknown user,
    ///     it must take as long as for a known one (no user enumeration by timing).
    ///   - now: seconds on a monotonic clock.
    public init(
        policy: LoginThrottle.Policy = .init(),
        verifyPassword: @escaping @Sendable (String, String?) -> Bool,
        now: @escaping @Sendable () -> Double
    ) {
        throttle = Mutex(LoginThrottle(policy: policy))
        self.verifyPassword = verifyPassword
        self.now = now
    }

    public func attempt(username: String, password: String, address: String, in home: Home) -> Outcome {
        if let wait = throttle.withLock({ $0.retryAfter(username: username, address: address, now: now()) }) {
            return .throttled(retryAfter: max(1, Int(wait.rounded(.up))))
        }
        let user = home.user(username: username)
        let valid = verifyPassword(password, user?.passwordHash)
        guard valid, let user else {
            throttle.withLock { $0.recordFailure(username: username, address: address, now: now()) }
            return .denied
        }
        throttle.withLock { $0.recordSuccess(username: username, now: now()) }
        return .granted(user)
    }
}
