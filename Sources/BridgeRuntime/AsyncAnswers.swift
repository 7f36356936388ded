import Synchronization

/// Async code waiting for an answer that arrives on another path (a device's state report, on
/// the MQTT event loop): `wait` registers, sends, and returns the first accepted answer, or nil
/// after `timeout` seconds or on cancellation.
final class AsyncAnswers<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Waiter {
        let id: Int
        let accepts: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Value?, Never>
    }

    private struct Registry {
        var next = 0
        var waiters: [Key: [Waiter]] = [:]
        /// Waits resolved before their waiter registered (a time-out that came first).
        var finished: Set<Int> = []
    }

    private let registry = Mutex(Registry())

    func wait(for key: Key, timeout: Double, accepts: @escaping @Sendable (Value) -> Bool,
              send: @escaping @Sendable () -> Void) async -> Value? {
        let id = registry.withLock { registry -> Int in
            registry.next += 1
            return registry.next
        }
        return await withTaskGroup(of: Value?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let late = self.registry.withLock { registry -> Bool in
                        if registry.finished.remove(id) != nil { return true }
                        registry.waiters[key, default: []].append(Waiter(id: id, accepts: accepts,
                                                                         continuation: continuation))
                        return false
                    }
                    if late { continuation.resume(returning: nil) } else { send() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
                self.resolve(key: key, id: id, with: nil)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            // The sleeper may not have run yet: whoever is still registered is resolved now.
            resolve(key: key, id: id, with: nil)
            await group.waitForAll()
            registry.withLock { _ = $0.finished.remove(id) }
            return first
        }
    }

    /// An answer arrived: every waiter under `key` that accepts it gets it.
    func deliver(_ value: Value, for key: Key) {
        let woken = registry.withLock { registry -> [Waiter] in
            guard let waiting = registry.waiters[key] else { return [] }
            let accepted = waiting.filter { $0.accepts(value) }
            registry.waiters[key] = waiting.filter { !$0.accepts(value) }
            if registry.waiters[key]?.isEmpty == true { registry.waiters[key] = nil }
            return accepted
        }
        for waiter in woken { waiter.continuation.resume(returning: value) }
    }

    private func resolve(key: Key, id: Int, with value: Value?) {
        let waiter = registry.withLock { registry -> Waiter? in
            guard let index = registry.waiters[key]?.firstIndex(where: { $0.id == id }) else {
                registry.finished.insert(id)
                return nil
            }
            let waiter = registry.waiters[key]!.remove(at: index)
            if registry.waiters[key]?.isEmpty == true { registry.waiters[key] = nil }
            return waiter
        }
        waiter?.continuation.resume(returning: value)
    }
}
