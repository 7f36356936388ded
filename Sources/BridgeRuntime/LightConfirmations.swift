import BridgeCore
import Foundation
import Synchronization

/// Cluster: an HTTP request that switches the light of a user another instance owns waits here
/// until that instance's published light state shows the outcome (or the wait times out).
final class LightConfirmations: Sendable {
    private final class Waiter: @unchecked Sendable {
        // @unchecked: `confirmed` is written under the registry's lock before `done` is signalled.
        let expected: Bool
        let done = DispatchSemaphore(value: 0)
        var confirmed = false

        init(expected: Bool) {
            self.expected = expected
        }
    }

    private let waiters = Mutex<[RoomKey: [Waiter]]>([:])

    /// Registers a wait for a room's light to be reported `on`, runs `send` (which relays the
    /// command), then blocks the calling thread (libmicrohttpd's, never async code) until the
    /// state arrives or `timeout` passes. Returns whether it arrived.
    func wait(for key: RoomKey, on: Bool, timeout: Double, send: () -> Void) -> Bool {
        let waiter = Waiter(expected: on)
        waiters.withLock { $0[key, default: []].append(waiter) }
        send()
        _ = waiter.done.wait(timeout: .now() + timeout)
        return waiters.withLock { all in
            all[key]?.removeAll { $0 === waiter }
            if all[key]?.isEmpty == true { all[key] = nil }
            return waiter.confirmed
        }
    }

    /// A room's light state as the owning instance published it: wakes the waits it satisfies.
    func observed(_ key: RoomKey, on: Bool) {
        waiters.withLock { all in
            guard let pending = all[key] else { return }
            for waiter in pending where waiter.expected == on && !waiter.confirmed {
                waiter.confirmed = true
                waiter.done.signal()
            }
        }
    }
}
