import BridgeCore
import BridgeMQTT
import Foundation
import Synchronization

/// Clears stale Home Assistant configs: right after the first connection it collects the retained
/// configs this bridge published in earlier runs (recognised by its bridge device id), and clears
/// (empty retained payload) those for entities it no longer has, or all of them when discovery is
/// off. Without this, a removed room's entities would come back in Home Assistant forever.
/// Brokers that give retained messages only to exact subscriptions (RabbitMQ's MQTT plugin) show
/// it nothing; there the configs the last run recorded in the database (`remembered`) are cleared.
final class DiscoverySweep: Sendable {
    /// How long after connecting the retained configs are collected.
    static let window = Duration.seconds(2)

    private struct State {
        var started = false
        var finished = false
        var found: Set<String> = []
    }

    private let state = Mutex(State())
    private let identity: HomeAssistantDiscovery

    /// - Parameter identity: the discovery settings that identify this bridge's configs (used even
    ///   when discovery is off, to find the configs to clear).
    init(identity: HomeAssistantDiscovery) {
        self.identity = identity
    }

    var filter: String { identity.configFilter }

    /// Takes a retained config seen during the window; returns false for messages it doesn't want.
    func collect(_ message: MQTTMessage) -> Bool {
        guard message.topic.hasPrefix(identity.prefix + "/"), message.topic.hasSuffix("/config") else { return false }
        state.withLock { state in
            if !state.finished, message.retain, !message.payload.isEmpty, identity.isOwn(payload: message.payload) {
                state.found.insert(message.topic)
            }
        }
        return true
    }

    /// Starts the window once (on the first connection); returns false if it already ran.
    func begin() -> Bool {
        state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
    }

    /// Ends the window: the configs found or `remembered` that are not in `current`.
    func finish(current: Set<String>, remembered: Set<String> = []) -> [String] {
        state.withLock { state in
            state.finished = true
            return state.found.union(remembered).subtracting(current).sorted()
        }
    }
}
