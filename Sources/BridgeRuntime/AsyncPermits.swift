import Synchronization

/// A counting semaphore for async code: at most `count` holders at once, the rest wait in order.
final class AsyncPermits: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Bool, Never>] = []
        var cancelled = false
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(available: count))
    }

    /// Waits for a permit; false when the permits were cancelled (shutting down).
    func acquire() async -> Bool {
        await withCheckedContinuation { continuation in
            let granted: Bool? = state.withLock { state in
                if state.cancelled { return false }
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return nil
            }
            if let granted { continuation.resume(returning: granted) }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume(returning: true)
    }

    /// Wakes every waiter with `false`; later acquires fail at once.
    func cancelAll() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.cancelled = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: false) }
    }
}
