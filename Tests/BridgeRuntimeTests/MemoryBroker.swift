import BridgeMQTT
import Foundation
import Synchronization
@testable import BridgeRuntime

/// An in-memory stand-in for the broker connection, so the features' rules are tested without
/// a broker (the integration tests run the same rules against real mosquitto and RabbitMQ).
final class MemoryBroker: BrokerLink {
    struct Published: Equatable {
        var topic: String
        var payload: String
        var retain: Bool
    }

    let events: AsyncStream<MQTTEvent>
    private let continuation: AsyncStream<MQTTEvent>.Continuation
    private let state = Mutex<(published: [Published], subscriptions: [String])>(([], []))

    init() {
        (events, continuation) = AsyncStream.makeStream(of: MQTTEvent.self)
    }

    var isConnected: Bool { true }
    var lastProblem: String? { nil }
    var queuedMessages: Int { 0 }
    var droppedMessages: Int { 0 }
    var failedAttempts: Int { 0 }
    var nextAttemptDelay: Double? { nil }

    func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32 {
        state.withLock { $0.published.append(Published(topic: topic, payload: String(decoding: payload, as: UTF8.self),
                                                       retain: retain)) }
        return 1
    }

    func subscribe(_ filter: String, qos: Int) throws(MQTTError) {
        state.withLock { $0.subscriptions.append(filter) }
    }

    func unsubscribe(_ filter: String) throws(MQTTError) {
        state.withLock { $0.subscriptions.removeAll { $0 == filter } }
    }

    func waitForBacklog(below limit: Int) async {}
    func waitForPublished(timeout: Double) async -> Bool { true }

    /// Everything published so far, and forgets it.
    func take() -> [Published] {
        state.withLock { current in
            defer { current.published.removeAll() }
            return current.published
        }
    }

    var subscriptions: [String] { state.withLock { $0.subscriptions } }
}
