import Dispatch
import Synchronization

/// The one way a server thread (libmicrohttpd's, which may block; never async code) waits for
/// work done elsewhere: the waiter blocks in `wait(timeout:)` until someone `deliver`s a value or
/// the time is up. The first delivery wins; later ones are ignored.
final class Rendezvous<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)
    private let done = DispatchSemaphore(value: 0)

    /// Hands over the value; false if one was already delivered.
    @discardableResult
    func deliver(_ delivered: Value) -> Bool {
        let first = value.withLock { current -> Bool in
            guard current == nil else { return false }
            current = delivered
            return true
        }
        if first { done.signal() }
        return first
    }

    /// Blocks until a value is delivered or `timeout` seconds pass; the value, or nil on time-out.
    func wait(timeout: Double) -> Value? {
        _ = done.wait(timeout: .now() + timeout)
        return value.withLock { $0 }
    }

    /// Whether a value has been delivered (never blocks).
    var isDelivered: Bool { value.withLock { $0 != nil } }
}
