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

    /// Connection attempts made since start.
    public var connectionAttempts: Int { connection.state.withLock { $0.attempts } }

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

/// The libmosquitto client, its network thread and the state both share with callers.
///
/// `@unchecked Sendable`: the `struct mosquitto *` is used by the network thread without the lock
/// (libmosquitto's own locks make that safe, `mosquitto_threaded_set`), and by callers only before
/// `stop()` destroys it: with `state` locked, or, for a publish, between counting itself in
/// `publishing` and counting itself out. `stop()` destroys it after the thread ended, with `state`
/// locked, `publishing` at 0 and `destroyed` set. Everything else mutable is in `state`.
final class MQTTConnection: @unchecked Sendable {
    enum Phase: Equatable {
        case idle, connecting, connected, stopped
    }

    struct State {
        var phase = Phase.idle
        var started = false
        var stopping = false
        var destroyed = false
        /// The broker's CONNACK on the current attempt, set by the callback.
        var connack: (code: Int32, sessionPresent: Bool)?
        var lastProblem: String?
        var takeover = TakeoverWatch(stablePeriod: MQTTConnection.stablePeriod)
        var subscriptions: [(filter: String, qos: Int)] = []
        /// QoS 1/2 message ids handed to libmosquitto and not yet acknowledged.
        var pending: Set<Int32> = []
        /// Publishes inside `mosquitto_publish` right now, which runs without the lock.
        var publishing = 0
        /// Acknowledgements that came while a publish was still inside `mosquitto_publish`, before
        /// it could register its id: that publish finds its id here and doesn't wait for an ack that
        /// already came. Emptied whenever no publish is in progress, so ids nobody claims (QoS 0
        /// messages also report when they were written) don't pile up.
        var ackedEarly: Set<Int32> = []
        var outbox: MQTTOutbox
        var droppedSinceConnected = 0
        var queueFullReported = false
        var redeliveries = RedeliveryFilter()
        var failedAttempts = 0
        var nextAttemptDelay: Double?
        var attempts = 0

        /// Counts messages the full queue dropped; the first drop of an outage is reported.
        mutating func noteDropped(_ dropped: Int, notices: inout [MQTTNotice]) {
            droppedSinceConnected += dropped
            if !queueFullReported {
                queueFullReported = true
                notices.append(.queueFull(capacity: outbox.capacity))
            }
        }
    }

    /// How a connection attempt (and the connection, if there was one) ended.
    private enum Outcome {
        case unreachable(String)
        case noConnack(Double)
        case refused(String)
        case lost(String, connectedFor: Double)
        case stopped(wasConnected: Bool)
    }

    /// A connection that stayed up this long resets the backoff when it is lost.
    static let stablePeriod = 10.0
    /// How often the network thread looks at the time when nothing happens.
    private static let tickMilliseconds: Int32 = 100

    let configuration: MQTTConfiguration
    let state: Mutex<State>
    private let continuation: AsyncStream<MQTTEvent>.Continuation
    private let mosq: OpaquePointer
    private let backoff: ReconnectBackoff
    private let window: Int
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// When something last came from the broker, in milliseconds on the monotonic clock.
    private let lastInbound = Atomic<Int64>(0)

    init(configuration: MQTTConfiguration, continuation: AsyncStream<MQTTEvent>.Continuation) throws(MQTTError) {
        guard let mosq = mosquitto_new(configuration.clientID, configuration.cleanSession, nil) else {
            throw MQTTError("create client", code: Int32(MOSQ_ERR_NOMEM.rawValue))
        }
        self.configuration = configuration
        self.continuation = continuation
        self.mosq = mosq
        backoff = ReconnectBackoff(minimum: configuration.reconnectMin, maximum: configuration.reconnectMax)
        window = configuration.maxInflight > 0 ? configuration.maxInflight : Int.max
        state = Mutex(State(outbox: MQTTOutbox(capacity: configuration.maxQueued)))
        mosquitto_user_data_set(mosq, Unmanaged.passUnretained(self).toOpaque())
        do {
            try configure(mosq)
        } catch {
            state.withLock { $0.destroyed = true }
            mosquitto_destroy(mosq)
            throw error
        }
    }

    // MARK: Setup

    /// Options every connection of this client uses, the session-discarding one included.
    private func applyIdentity(_ mosq: OpaquePointer) throws(MQTTError) {
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311), "set protocol")
        // Without it, Nagle's algorithm and delayed ACKs hold small QoS 1 packets for ~40 ms.
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1), "set TCP_NODELAY")
        // This client drives the network itself (mosquitto_loop on its own thread).
        try MQTTError.check(mosquitto_threaded_set(mosq, true), "set threaded")
        if let username = configuration.username {
            try MQTTError.check(mosquitto_username_pw_set(mosq, username, configuration.password), "set credentials")
        }
        if let tls = configuration.tls {
            try MQTTError.check(mosquitto_tls_set(mosq, tls.caFile, tls.caFile == nil ? "/etc/ssl/certs" : nil, tls.certFile, tls.keyFile, nil), "set up TLS")
            try MQTTError.check(mosquitto_tls_insecure_set(mosq, !tls.verifyHostname), "set TLS hostname check")
        }
    }

    private func configure(_ mosq: OpaquePointer) throws(MQTTError) {
        try applyIdentity(mosq)
        if let will = configuration.will {
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set(mosq, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos), will.retain)
            }
            try MQTTError.check(rc, "set last will")
        }
        try MQTTError.check(mosquitto_max_inflight_messages_set(mosq, UInt32(max(0, configuration.maxInflight))), "set inflight")
        mosquitto_connect_with_flags_callback_set(mosq) { mosq, object, rc, flags in
            guard let mosq, let object else { return }
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().didConnect(mosq, code: rc, flags: flags)
        }
        mosquitto_publish_callback_set(mosq) { _, object, mid in
            guard let object else { return }
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().didPublish(messageID: mid)
        }
        mosquitto_message_callback_set(mosq) { _, object, message in
            guard let object, let message, let topic = message.pointee.topic else { return }
            let length = Int(message.pointee.payloadlen)
            let payload: [UInt8]
            if let bytes = message.pointee.payload, length > 0 {
                payload = Array(UnsafeRawBufferPointer(start: bytes, count: length))
            } else {
                payload = []
            }
            let copy = MQTTMessage(
                topic: String(cString: topic),
                payload: payload,
                qos: Int(message.pointee.qos),
                retain: message.pointee.retain,
                messageID: Int(message.pointee.mid)
            )
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().didReceive(copy)
        }
        // libmosquitto logs every packet it reads ("Client x received PINGRESP", "... PUBACK"):
        // the one place that also sees PINGRESP, so the liveness check sees every packet.
        mosquitto_log_callback_set(mosq) { _, object, _, text in
            guard let object, let text, strstr(text, " received ") != nil else { return }
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().sawInbound()
        }
    }

    // MARK: Callbacks (network thread)

    private func didConnect(_ mosq: OpaquePointer, code: Int32, flags: Int32) {
        sawInbound()
        state.withLock { state in
            state.connack = (code, flags & 1 != 0)
            guard code == 0 else { return }
            state.redeliveries.connected(sessionPresent: flags & 1 != 0)
            // Clean sessions forget subscriptions: renew them before anyone is told we're connected.
            for subscription in state.subscriptions {
                mosquitto_subscribe(mosq, nil, subscription.filter, Int32(subscription.qos))
            }
        }
    }

    private func didPublish(messageID: Int32) {
        state.withLock { state in
            if state.pending.remove(messageID) == nil, state.publishing > 0 { state.ackedEarly.insert(messageID) }
        }
    }

    private func didReceive(_ message: MQTTMessage) {
        var message = message
        message.isRedelivery = state.withLock {
            $0.redeliveries.isRedelivery(messageID: message.messageID, qos: message.qos)
        }
        continuation.yield(.message(message))
    }

    private func sawInbound() {
        lastInbound.store(MQTTConnection.milliseconds(), ordering: .relaxed)
    }

    // MARK: Callers

    func start() throws(MQTTError) {
        let fresh = state.withLock { state -> Bool in
            guard !state.started, !state.stopping else { return false }
            state.started = true
            return true
        }
        guard fresh else { throw MQTTError("start", code: Int32(MOSQ_ERR_INVAL.rawValue)) }
        let thread = Thread { [self] in run() }
        thread.name = "mqtt"
        thread.start()
    }

    func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32 {
        // Refuse what libmosquitto would refuse now, rather than when it leaves the queue.
        guard (0...2).contains(qos), payload.count <= 268_435_455,
              mosquitto_pub_topic_check(topic) == Int32(MOSQ_ERR_SUCCESS.rawValue)
        else { throw MQTTError("publish to \(topic)", code: Int32(MOSQ_ERR_INVAL.rawValue)) }
        var notices: [MQTTNotice] = []
        let route = state.withLock { state -> Result<Bool, MQTTError> in
            let connected = state.phase == .connected
            guard !state.destroyed, connected || qos > 0 else {
                return .failure(MQTTError("publish to \(topic)", code: Int32(MOSQ_ERR_NO_CONN.rawValue)))
            }
            let inWindow = qos == 0 || state.pending.count + state.publishing < window || configuration.maxQueued == 0
            if connected, state.outbox.isEmpty, inWindow {
                state.publishing += 1
                return .success(true)
            }
            // While connected the queue only holds what the inflight window keeps back, and drops
            // nothing (producers wait in `waitForBacklog`); while the broker is away it is bounded.
            let dropped = state.outbox.append(.init(topic: topic, payload: payload, qos: qos, retain: retain),
                                              bounded: !connected)
            if dropped > 0 { state.noteDropped(dropped, notices: &notices) }
            if connected { flush(&state) }
            return .success(false)
        }
        for notice in notices { configuration.onNotice?(notice) }
        guard try route.get() else { return 0 }
        return try publishNow(topic: topic, payload: payload, qos: qos, retain: retain)
    }

    /// Hands a message to libmosquitto without holding `state`: libmosquitto takes its own locks
    /// and wakes its network thread, whose acknowledgement callback needs `state` meanwhile.
    private func publishNow(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32 {
        var messageID: Int32 = 0
        let rc = payload.withUnsafeBytes { bytes in
            mosquitto_publish(mosq, &messageID, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos), retain)
        }
        // For QoS > 0, NO_CONN means libmosquitto queued it for the reconnect.
        let accepted = rc == Int32(MOSQ_ERR_SUCCESS.rawValue) || (qos > 0 && rc == Int32(MOSQ_ERR_NO_CONN.rawValue))
        state.withLock { state in
            state.publishing -= 1
            if accepted, qos > 0, state.ackedEarly.remove(messageID) == nil { state.pending.insert(messageID) }
            if state.publishing == 0 { state.ackedEarly.removeAll(keepingCapacity: true) }
        }
        guard accepted else { throw MQTTError("publish to \(topic)", code: rc) }
        return messageID
    }

    func subscribe(_ filter: String, qos: Int) throws(MQTTError) {
        let rc = state.withLock { state -> Int32 in
            guard !state.destroyed else { return Int32(MOSQ_ERR_NO_CONN.rawValue) }
            state.subscriptions.removeAll { $0.filter == filter }
            state.subscriptions.append((filter, qos))
            guard state.phase == .connected else { return Int32(MOSQ_ERR_SUCCESS.rawValue) }
            return mosquitto_subscribe(mosq, nil, filter, Int32(qos))
        }
        try MQTTError.check(rc, "subscribe to \(filter)")
    }

    func unsubscribe(_ filter: String) throws(MQTTError) {
        let rc = state.withLock { state -> Int32 in
            guard !state.destroyed else { return Int32(MOSQ_ERR_NO_CONN.rawValue) }
            state.subscriptions.removeAll { $0.filter == filter }
            guard state.phase == .connected else { return Int32(MOSQ_ERR_SUCCESS.rawValue) }
            return mosquitto_unsubscribe(mosq, nil, filter)
        }
        try MQTTError.check(rc, "unsubscribe from \(filter)")
    }

    var allDelivered: Bool { state.withLock { $0.pending.isEmpty && $0.outbox.isEmpty } }

    func stop() {
        let (first, started) = state.withLock { state -> (Bool, Bool) in
            defer { state.stopping = true }
            return (!state.stopping, state.started)
        }
        guard first else { return }
        wake.signal()
        // The thread notices within a tick, or after the clean disconnect (at most ~1 s).
        if started, finished.wait(timeout: .now() + 10) == .timedOut {
            // Never destroy what the thread may still use; leak it instead.
            continuation.finish()
            return
        }
        // A publish may still be inside mosquitto_publish (outside the lock): destroy after it.
        while !state.withLock({ state -> Bool in
            guard state.publishing == 0 else { return false }
            state.destroyed = true
            state.phase = .stopped
            mosquitto_destroy(mosq)
            return true
        }) {
            usleep(100)
        }
        continuation.finish()
    }

    // MARK: The network thread

    private var isStopping: Bool { state.withLock { $0.stopping } }

    private func run() {
        var discardOldSession = !configuration.cleanSession
        while !isStopping {
            let outcome: Outcome
            if discardOldSession, let failure = startWithFreshSession() {
                outcome = failure
            } else {
                discardOldSession = false
                outcome = connectAndServe()
            }
            let event: MQTTEvent
            let problem: String
            switch outcome {
            case .stopped(let wasConnected):
                if wasConnected { continuation.yield(.disconnected(unexpected: false, reason: "disconnected")) }
                finish()
                return
            case .unreachable(let reason):
                (event, problem) = (.disconnected(unexpected: true, reason: reason), reason)
            case .noConnack(let seconds):
                let reason = "no answer to CONNECT within \(MQTTConnection.format(seconds)) s"
                (event, problem) = (.disconnected(unexpected: true, reason: reason), reason)
            case .refused(let reason):
                (event, problem) = (.refused(reason: reason), "broker refused: \(reason)")
            case .lost(let reason, let connectedFor):
                let clientID = configuration.clientID
                let suspicion = state.withLock { $0.takeover.lost(after: connectedFor, clientID: clientID) }
                let text = suspicion.map { "\(reason); \($0)" } ?? reason
                (event, problem) = (.disconnected(unexpected: true, reason: text), text)
            }
            let delay = state.withLock { state -> Double in
                if case .lost(_, let connectedFor) = outcome, connectedFor >= MQTTConnection.stablePeriod {
                    state.failedAttempts = 0
                }
                state.failedAttempts += 1
                state.lastProblem = problem
                let delay = backoff.delay(afterFailures: state.failedAttempts, random: Double.random(in: 0..<1))
                state.nextAttemptDelay = delay
                return delay
            }
            continuation.yield(event)
            if isStopping { break }
            _ = wake.wait(timeout: .now() + delay)
        }
        finish()
    }

    private func finish() {
        state.withLock { state in
            state.phase = .stopped
            state.nextAttemptDelay = nil
        }
        finished.signal()
    }

    /// One connection attempt, and the connection until it ends.
    private func connectAndServe() -> Outcome {
        let keepalive = Double(configuration.keepalive)
        let connackTimeout = max(keepalive, 5)
        let attemptStarted = MQTTConnection.seconds()
        sawInbound()
        state.withLock { state in
            state.phase = .connecting
            state.connack = nil
            state.attempts += 1
        }
        let rc = mosquitto_connect_async(mosq, configuration.host, Int32(configuration.port), Int32(configuration.keepalive))
        guard rc == Int32(MOSQ_ERR_SUCCESS.rawValue) else {
            let reason = MQTTConnection.describe(rc)
            state.withLock { $0.phase = .idle }
            return .unreachable(reason)
        }
        var connectedAt: Double?
        var forced: Outcome?
        var forcedAt = 0.0
        var stopDeadline: Double?
        while true {
            let rc = mosquitto_loop(mosq, MQTTConnection.tickMilliseconds, 1)
            let now = MQTTConnection.seconds()
            var notices: [MQTTNotice] = []
            var refused: Int32?
            let promoted = state.withLock { state -> Bool in
                var promoted = false
                if state.phase == .connecting, let connack = state.connack {
                    if connack.code == 0 {
                        // Only now, after libmosquitto re-sent what it held, may new messages go
                        // out: nothing overtakes an older message on the same topic.
                        state.phase = .connected
                        state.lastProblem = nil
                        state.nextAttemptDelay = nil
                        if !state.outbox.isEmpty || state.droppedSinceConnected > 0 {
                            notices.append(.queueFlushed(queued: state.outbox.count, dropped: state.droppedSinceConnected,
                                                         droppedTotal: state.outbox.droppedTotal))
                        }
                        state.droppedSinceConnected = 0
                        state.queueFullReported = false
                        promoted = true
                    } else {
                        refused = connack.code
                    }
                }
                if state.phase == .connected { flush(&state) }
                return promoted
            }
            if promoted {
                connectedAt = now
                continuation.yield(.connected)
            }
            for notice in notices { configuration.onNotice?(notice) }
            if let refused, forced == nil {
                forced = .refused(MQTTConnection.connackReason(refused))
                forcedAt = now
                if rc == Int32(MOSQ_ERR_SUCCESS.rawValue) { closeSocket() }
            }

            if rc != Int32(MOSQ_ERR_SUCCESS.rawValue) || (forced != nil && now - forcedAt > 2) {
                // The connection is over (closed by either side, refused, or given up on). What the
                // queue held beyond its capacity while connected is cut back to it now.
                var lostNotices: [MQTTNotice] = []
                state.withLock { state in
                    if connectedAt != nil { state.redeliveries.connectionLost() }
                    state.phase = .idle
                    let dropped = state.outbox.trim()
                    if dropped > 0 { state.noteDropped(dropped, notices: &lostNotices) }
                }
                for notice in lostNotices { configuration.onNotice?(notice) }
                if stopDeadline != nil { return .stopped(wasConnected: connectedAt != nil) }
                if let forced { return forced }
                let reason = MQTTConnection.describe(rc)
                if let connectedAt { return .lost(reason, connectedFor: now - connectedAt) }
                return .unreachable(reason)
            }
            if let deadline = stopDeadline {
                if now > deadline { closeSocket() }
                continue
            }
            if isStopping {
                // A clean DISCONNECT when connected (no last will); otherwise just close.
                if connectedAt != nil {
                    mosquitto_disconnect(mosq)
                } else {
                    closeSocket()
                }
                stopDeadline = now + 1
                continue
            }
            guard forced == nil else { continue }
            if connectedAt == nil, now - attemptStarted > connackTimeout {
                configuration.onNotice?(.noConnack(seconds: connackTimeout))
                forced = .noConnack(connackTimeout)
                forcedAt = now
                closeSocket()
            } else if let connectedAt {
                let silence = now - Double(lastInbound.load(ordering: .relaxed)) / 1000
                if silence > 1.5 * keepalive {
                    configuration.onNotice?(.deadConnection(silence: silence, keepalive: configuration.keepalive))
                    forced = .lost("no answer from the broker for \(MQTTConnection.format(silence)) s "
                        + "(keepalive \(configuration.keepalive) s)", connectedFor: now - connectedAt)
                    forcedAt = now
                    closeSocket()
                }
            }
        }
    }

    /// Hands queued messages to libmosquitto, oldest first, while fewer than `maxInflight` wait
    /// for their acknowledgement.
    private func flush(_ state: inout State) {
        while let message = state.outbox.first {
            if message.qos > 0, state.pending.count >= window { return }
            var messageID: Int32 = 0
            let rc = message.payload.withUnsafeBytes { bytes in
                mosquitto_publish(mosq, &messageID, message.topic, Int32(bytes.count), bytes.baseAddress,
                                  Int32(message.qos), message.retain)
            }
            if rc == Int32(MOSQ_ERR_SUCCESS.rawValue) || (message.qos > 0 && rc == Int32(MOSQ_ERR_NO_CONN.rawValue)) {
                if message.qos > 0 { state.pending.insert(messageID) }
                _ = state.outbox.removeFirst()
                // NO_CONN: the connection just went; libmosquitto keeps that one, the rest wait here.
                if rc != Int32(MOSQ_ERR_SUCCESS.rawValue) { return }
            } else if rc == Int32(MOSQ_ERR_NO_CONN.rawValue) {
                return
            } else {
                _ = state.outbox.removeFirst()  // cannot be sent at all (checked before queueing)
            }
        }
    }

    /// Closes the connection's socket under libmosquitto, which then reports the connection lost
    /// on its next read, as if the network had closed it.
    private func closeSocket() {
        let socket = mosquitto_socket(mosq)
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    /// Before the first connection of a client with a persistent session: connects once with a
    /// clean session and disconnects, so the broker discards a session left by an earlier run
    /// (and the messages queued in it). Returns nil on success.
    private func startWithFreshSession() -> Outcome? {
        guard let temporary = mosquitto_new(configuration.clientID, true, nil) else { return .unreachable("out of memory") }
        defer { mosquitto_destroy(temporary) }
        let answer = ConnackBox()
        mosquitto_user_data_set(temporary, Unmanaged.passUnretained(answer).toOpaque())
        do {
            try applyIdentity(temporary)
        } catch {
            return .unreachable(error.description)
        }
        mosquitto_connect_callback_set(temporary) { _, object, rc in
            guard let object else { return }
            Unmanaged<ConnackBox>.fromOpaque(object).takeUnretainedValue().code.withLock { $0 = rc }
        }
        state.withLock { $0.attempts += 1 }
        let started = MQTTConnection.seconds()
        let timeout = max(Double(configuration.keepalive), 5)
        let rc = mosquitto_connect_async(temporary, configuration.host, Int32(configuration.port),
                                         Int32(configuration.keepalive))
        guard rc == Int32(MOSQ_ERR_SUCCESS.rawValue) else { return .unreachable(MQTTConnection.describe(rc)) }
        while true {
            let rc = mosquitto_loop(temporary, MQTTConnection.tickMilliseconds, 1)
            if let code = answer.code.withLock({ $0 }) {
                guard code == 0 else { return .refused(MQTTConnection.connackReason(code)) }
                mosquitto_disconnect(temporary)
                let deadline = MQTTConnection.seconds() + 1
                while MQTTConnection.seconds() < deadline,
                      mosquitto_loop(temporary, MQTTConnection.tickMilliseconds, 1) == Int32(MOSQ_ERR_SUCCESS.rawValue) {}
                return nil
            }
            if rc != Int32(MOSQ_ERR_SUCCESS.rawValue) { return .unreachable(MQTTConnection.describe(rc)) }
            if isStopping { return .stopped(wasConnected: false) }
            if MQTTConnection.seconds() - started > timeout {
                configuration.onNotice?(.noConnack(seconds: timeout))
                return .noConnack(timeout)
            }
        }
    }

    // MARK: Helpers

    /// The CONNACK return codes of MQTT 3.1.1, in words.
    static func connackReason(_ code: Int32) -> String {
        switch code {
        case 1: "unacceptable protocol version"
        case 2: "client identifier rejected"
        case 3: "server unavailable"
        case 4: "bad user name or password"
        case 5: "not authorised"
        default: String(cString: mosquitto_connack_string(code))
        }
    }

    static func describe(_ rc: Int32) -> String {
        if rc == Int32(MOSQ_ERR_ERRNO.rawValue) { return String(cString: strerror(errno)) }
        return String(cString: mosquitto_strerror(rc))
    }

    static func format(_ seconds: Double) -> String {
        String(format: "%.1f", seconds)
    }

    static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    static func milliseconds() -> Int64 {
        Int64(seconds() * 1000)
    }
}

/// The CONNACK code of the session-discarding connection.
private final class ConnackBox: Sendable {
    let code = Mutex<Int32?>(nil)
}
