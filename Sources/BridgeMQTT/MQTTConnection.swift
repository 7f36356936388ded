import CMosquitto
import Foundation
import Synchronization
import Glibc

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
    enum Outcome {
        case unreachable(String)
        case noConnack(Double)
        case refused(String)
        case lost(String, connectedFor: Double)
        case stopped(wasConnected: Bool)
    }

    /// A connection that stayed up this long resets the backoff when it is lost.
    static let stablePeriod = 10.0
    /// How often the network thread looks at the time when nothing happens.
    static let tickMilliseconds: Int32 = 100

    let configuration: MQTTConfiguration
    let state: Mutex<State>
    let continuation: AsyncStream<MQTTEvent>.Continuation
    let mosq: OpaquePointer
    let backoff: ReconnectBackoff
    let window: Int
    let wake = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    /// When something last came from the broker, in milliseconds on the monotonic clock.
    let lastInbound = Atomic<Int64>(0)

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
    func applyIdentity(_ mosq: OpaquePointer) throws(MQTTError) {
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

    func configure(_ mosq: OpaquePointer) throws(MQTTError) {
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

    func didConnect(_ mosq: OpaquePointer, code: Int32, flags: Int32) {
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

    func didPublish(messageID: Int32) {
        state.withLock { state in
            if state.pending.remove(messageID) == nil, state.publishing > 0 { state.ackedEarly.insert(messageID) }
        }
    }

    func didReceive(_ message: MQTTMessage) {
        var message = message
        message.isRedelivery = state.withLock {
            $0.redeliveries.isRedelivery(messageID: message.messageID, qos: message.qos)
        }
        continuation.yield(.message(message))
    }

    func sawInbound() {
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
    func publishNow(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32 {
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
}
