import BridgeCore
import Foundation
import Synchronization

/// The bridge's live state, shared by the MQTT side (async code) and the HTTP side (libmicrohttpd's
/// threads), hence a `Mutex` rather than an actor. Held only to read or change values: nothing
/// is serialised or published under it (`StatePublisher` does that from a copy).
final class HomeStore: Sendable {
    struct State {
        var home: Home
        /// Polled rooms whose upstream is failing.
        var offline: Set<RoomKey> = []
    }

    private let state: Mutex<State>

    init(home: Home) {
        state = Mutex(State(home: home))
    }

    /// A copy of the current home (copy-on-write: cheap until the next change).
    var home: Home { state.withLock { $0.home } }

    func withLock<T>(_ body: (inout State) -> T) -> T {
        state.withLock { body(&$0) }
    }
}
