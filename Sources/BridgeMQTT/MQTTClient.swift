import CMosquitto
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An MQTT client over libmosquitto, for async Swift code.
///
/// The client runs its own network thread (libmosquitto's `mosquitto_loop`), so it decides when to
/// reconnect, how long to wait for the broker, and what to do with messages while the broker is
/// away:
/// - Reconnects with capped exponential backoff and jitter (`ReconnectBackoff`): after a lost
///   connection, a refused one (wrong credentials) or an unreachable broker alike. While waiting
///   it sleeps; nothing runs.
/// - Takes a connection from which nothing has come for 1.5 × keepalive as dead (a broker that
///   froze, a link that silently drops everything) and closes it, and gives up on a broker that
///   takes the TCP connection but never answers CONNECT within keepalive seconds.
/// - QoS 1/2 publishes wait in a bounded queue of its own (`MQTTOutbox`, `maxQueued`) while the
///   broker is away, and go out in order once it is back; libmosquitto itself holds at most
///   `maxInflight` unacknowledged messages, which it re-sends after a reconnect. While connected
///   the queue holds what the inflight window keeps back and drops nothing: producers wait for
///   the broker through `waitForBacklog(below:)` instead (cut back to `maxQueued` if the
///   connection is lost).
/// - With `cleanSession` false the broker keeps the session between reconnects, and messages it
///   re-sends after a reconnect are marked (`MQTTMessage.isRedelivery`).
///
/// Callbacks from libmosquitto are C functions that capture nothing; they reach the connection
/// through the `Unmanaged` pointer given to libmosquitto and hand everything to async code through
/// `events`.
public final class MQTTClient: Sendable {
    /// Everything that happens on the connection, in order. Meant for one consumer.
    public let events: AsyncStream<MQTTEvent>

    private let connection: MQTTConnection

    /// Creates the client; nothing connects until `start()`.
    public init(configuration: MQTTConfiguration) throws(MQTTError) {
        MQTTClient.initializeLibrary
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTEvent.self)
        events = stream
        connection = try MQTTConnection(configuration: configuration, continuation: continuation)
    }

    deinit {
        connection.stop()
    }

    /// libmosquitto's global setup, run once per process.
    private static let initializeLibrary: Void = {
        mosquitto_lib_init()
    }()

    /// Starts the network thread and the first connection attempt. A broker that is down is not an
    /// error: the client keeps trying with backoff and `events` reports `.connected` when it succeeds.
    public func start() throws(MQTTError) {
        try connection.start()
    }

    /// Whether the broker has accepted the current connection.
    public var isConnected: Bool { connection.state.withLock { $0.phase == .connected } }

    /// Why the last connection attempt or connection failed, if it did (`broker refused: not
    /// authorised`, `Connection refused`, ...).
    public var lastProblem: String? { connection.state.withLock { $0.lastProblem } }

    /// Messages waiting in the client's own queue (mostly: while the broker is away).
    public var queuedMessages: Int { connection.state.withLock { $0.outbox.count } }

    /// Back-pressure for producers: waits while the client is connected and its backlog (messages
    /// in its queue, and QoS 1/2 messages handed to libmosquitto and not yet acknowledged) is at
    /// `limit` or more. While connected the queue never drops a message, so a producer that
    /// publishes in bursts waits here between them; while the broker is away it returns at once
    /// and the queue's bound (`maxQueued`) decides what is kept.
    public func waitForBacklog(below limit: Int) async {
        while !Task.isCancelled {
            let waiting = connection.state.withLock { state in
                state.phase == .connected && state.outbox.count + state.pending.count >= limit
            }
            guard waiting else { return }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Messages dropped from the queue since the client was made, because it was full.
    public var droppedMessages: Int { connection.state.withLock { $0.outbox.droppedTotal } }

    /// Connection attempts that failed in a row (0 while connected).
    public var failedAttempts: Int { connection.state.withLock { $0.phase == .connected ? 0 : $0.failedAttempts } }

    /// Seconds the client waits before its next connection attempt, while it waits.
    public var nextAttemptDelay: Double? { connection.state.withLock { $0.nextAttemptDelay } }

    /// Publishes a message. QoS 1/2 messages published while the broker is away wait in the
    /// client's queue (up to `maxQueued`) and go out, in order, when it is back; QoS 0 messages
    /// then fail with `MOSQ_ERR_NO_CONN`.
    /// - Returns: the message id, or 0 when the message was queued.
    @discardableResult
    public func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32 {
        try connection.publish(topic: topic, payload: payload, qos: qos, retain: retain)
    }

    /// Publishes text.
    public func publish(topic: String, text: String, qos: Int, retain: Bool) throws(MQTTError) {
        try publish(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// Subscribes now (when connected) and again after every reconnect.
    public func subscribe(_ filter: String, qos: Int) throws(MQTTError) {
        try connection.subscribe(filter, qos: qos)
    }

    /// Stops a subscription, now and for later reconnects.
    public func unsubscribe(_ filter: String) throws(MQTTError) {
        try connection.unsubscribe(filter)
    }

    /// Waits until every message published so far has been handed to the broker (acknowledged for
    /// QoS 1), or `timeout` seconds pass. Returns whether everything went out.
    public func waitForPublished(timeout: Double) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < deadline {
            if connection.allDelivered { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return connection.allDelivered
    }

    /// Disconnects cleanly (no last will) and stops the network thread. The client can't be
    /// started again.
    public func stop() {
        connection.stop()
    }
}
