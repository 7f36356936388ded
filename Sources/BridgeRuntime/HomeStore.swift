import BridgeCore
import Foundation
import Synchronization

/// The bridge's live state, shared by the MQTT side (async code) and the HTTP side (libmicrohttpd's
/// threads), hence a `Mutex` rather than an actor. Held only to read or change values: nothing
/// is serialised or published under it (`StatePublisher` does that from a copy).
///
/// Readers take the home as last changed from a lock of its own that guards one reference: every
/// HTTP request reads the home, on several of libmicrohttpd's threads at once, and copying the
/// `Home` itself (a retain per member) under the state's lock made them queue for it
/// (docs/performance.md, "The HTTP cost, profiled").
final class HomeStore: Sendable {
    struct State {
        var home: Home
        /// Polled rooms whose upstream is failing.
        var offline: Set<RoomKey> = []
    }

    /// A home as it was after one change; never changed itself.
    private final class Snapshot: Sendable {
        let home: Home
        init(_ home: Home) { self.home = home }
    }

    private let state: Mutex<State>
    private let latest: Mutex<Snapshot>

    init(home: Home) {
        state = Mutex(State(home: home))
        latest = Mutex(Snapshot(home))
    }

    /// A copy of the current home (copy-on-write: cheap until the next change).
    var home: Home { latest.withLock { $0 }.home }

    /// Reads the state, home and offline rooms together.
    func read<T>(_ body: (State) -> T) -> T {
        state.withLock { body($0) }
    }

    /// Changes the state; the home readers see is replaced before the lock is let go, so
    /// a reader after this call sees its change.
    func withLock<T>(_ body: (inout State) -> T) -> T {
        state.withLock { state in
            let result = body(&state)
            let snapshot = Snapshot(state.home)
            latest.withLock { $0 = snapshot }
            return result
        }
    }
}
