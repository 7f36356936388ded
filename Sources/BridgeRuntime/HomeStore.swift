import BridgeCore
import Foundation
import Synchronization

/// The bridge's live state, shared by the MQTT side (async code) and the HTTP side (libmicrohttpd's
/// threads), hence a `Mutex` rather than an actor.
final class HomeStore: Sendable {
    struct State {
        var home: Home
        var tracker: PublishTracker
        /// Polled rooms whose upstream is failing.
        var offline: Set<RoomKey> = []
    }

    private let state: Mutex<State>
    private let clockStart = ContinuousClock.now

    init(home: Home, refresh: Double) {
        state = Mutex(State(home: home, tracker: PublishTracker(refresh: refresh)))
    }

    /// A copy of the current home (copy-on-write: cheap until the next change).
    var home: Home { state.withLock { $0.home } }

    /// Seconds on a monotonic clock, for the publish tracker.
    var now: Double {
        let elapsed = ContinuousClock.now - clockStart
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    func withLock<T>(_ body: (inout State) -> T) -> T {
        state.withLock { body(&$0) }
    }
}
