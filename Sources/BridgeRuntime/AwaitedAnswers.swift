import Foundation
import Synchronization

/// Cluster: a thread (libmicrohttpd's, never async code) that sent another instance something over
/// MQTT waits here for the answer to come back on a subscription: the owner's confirmed light
/// state, or its reply to a history request.
final class AwaitedAnswers<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private final class Waiter: @unchecked Sendable {
        // @unchecked: `answer` is written under the registry's lock before `done` is signalled,
        // and read under it after.
        let accepts: @Sendable (Value) -> Bool
        let done = DispatchSemaphore(value: 0)
        var answer: Value?

        init(accepts: @escaping @Sendable (Value) -> Bool) {
            self.accepts = accepts
        }
    }

    private let waiters = Mutex<[Key: [Waiter]]>([:])

    /// Registers a wait for an answer under `key` that `accepts`, runs `send` (so no answer can
    /// come before the wait exists), then blocks until one arrives or `timeout` seconds pass.
    func wait(for key: Key, timeout: Double, accepts: @escaping @Sendable (Value) -> Bool = { _ in true },
              send: () -> Void) -> Value? {
        let waiter = Waiter(accepts: accepts)
        waiters.withLock { $0[key, default: []].append(waiter) }
        send()
        _ = waiter.done.wait(timeout: .now() + timeout)
        return waiters.withLock { all in
            all[key]?.removeAll { $0 === waiter }
            if all[key]?.isEmpty == true { all[key] = nil }
            return waiter.answer
        }
    }

    /// An answer arrived: wakes every wait under `key` that accepts it.
    func deliver(_ value: Value, for key: Key) {
        waiters.withLock { all in
            for waiter in all[key] ?? [] where waiter.answer == nil && waiter.accepts(value) {
                waiter.answer = value
                waiter.done.signal()
            }
        }
    }
}
