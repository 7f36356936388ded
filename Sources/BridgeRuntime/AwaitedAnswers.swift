import Foundation
import Synchronization

/// Cluster: a thread (libmicrohttpd's, never async code) that sent another instance something over
/// MQTT waits here for the answer to come back on a subscription: the owner's confirmed light
/// state, or its reply to a history request. Each wait is a `Rendezvous`.
final class AwaitedAnswers<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Waiter: Sendable {
        let accepts: @Sendable (Value) -> Bool
        let answer = Rendezvous<Value>()
    }

    private let waiters = Mutex<[Key: [Waiter]]>([:])

    /// Registers a wait for an answer under `key` that `accepts`, runs `send` (so no answer can
    /// come before the wait exists), then blocks until one arrives or `timeout` seconds pass.
    func wait(for key: Key, timeout: Double, accepts: @escaping @Sendable (Value) -> Bool = { _ in true },
              send: () -> Void) -> Value? {
        let waiter = Waiter(accepts: accepts)
        waiters.withLock { $0[key, default: []].append(waiter) }
        send()
        let answer = waiter.answer.wait(timeout: timeout)
        waiters.withLock { all in
            all[key]?.removeAll { $0.answer === waiter.answer }
            if all[key]?.isEmpty == true { all[key] = nil }
        }
        return answer
    }

    /// An answer arrived: wakes every wait under `key` that accepts it.
    func deliver(_ value: Value, for key: Key) {
        let waiting = waiters.withLock { $0[key] ?? [] }
        for waiter in waiting where waiter.accepts(value) { waiter.answer.deliver(value) }
    }
}
