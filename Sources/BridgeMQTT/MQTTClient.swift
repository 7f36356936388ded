import CMosquitto
import Foundation
import Synchronization

/// An MQTT client over libmosquitto, for async Swift code.
///
/// libmosquitto runs the connection on its own thread (`mosquitto_loop_start`) and reconnects by
/// itself with capped exponential backoff. Its callbacks are C functions that capture nothing;
/// they reach this client's state through the `Unmanaged` pointer given to `mosquitto_new` and
/// hand everything to async code through `events`.
public final class MQTTClient: Sendable {
    /// Everything that happens on the connection, in order. Meant for one consumer.
    public let events: AsyncStream<MQTTEvent>

    private let configuration: MQTTConfiguration
    private let handle: MosquittoHandle
    private let context: CallbackContext

    /// Creates the client; nothing connects until `start()`.
    public init(configuration: MQTTConfiguration) throws(MQTTError) {
        MQTTClient.initializeLibrary
        self.configuration = configuration
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTEvent.self)
        events = stream
        context = CallbackContext(continuation: continuation)
        guard let mosq = mosquitto_new(configuration.clientID, true, Unmanaged.passUnretained(context).toOpaque()) else {
            throw MQTTError("create client", code: Int32(MOSQ_ERR_NOMEM.rawValue))
        }
        handle = MosquittoHandle(mosq)
        try configure(mosq)
    }

    deinit {
        handle.destroy()
        context.continuation.finish()
    }

    /// libmosquitto's global setup, run once per process.
    private static let initializeLibrary: Void = {
        mosquitto_lib_init()
    }()

    private func configure(_ mosq: OpaquePointer) throws(MQTTError) {
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311), "set protocol")
        // Without it, Nagle's algorithm and delayed ACKs hold small QoS 1 packets for ~40 ms.
        try MQTTError.check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1), "set TCP_NODELAY")
        if let username = configuration.username {
            try MQTTError.check(mosquitto_username_pw_set(mosq, username, configuration.password), "set credentials")
        }
        if let will = configuration.will {
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set(mosq, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos), will.retain)
            }
            try MQTTError.check(rc, "set last will")
        }
        if let tls = configuration.tls {
            try MQTTError.check(mosquitto_tls_set(mosq, tls.caFile, tls.caFile == nil ? "/etc/ssl/certs" : nil, tls.certFile, tls.keyFile, nil), "set up TLS")
            try MQTTError.check(mosquitto_tls_insecure_set(mosq, !tls.verifyHostname), "set TLS hostname check")
        }
        try MQTTError.check(
            mosquitto_reconnect_delay_set(
                mosq, UInt32(max(1, configuration.reconnectMin)), UInt32(max(1, configuration.reconnectMax)), true
            ),
            "set reconnect delay"
        )
        try MQTTError.check(mosquitto_max_inflight_messages_set(mosq, UInt32(configuration.maxInflight)), "set inflight")
        mosquitto_connect_callback_set(mosq) { mosq, object, rc in
            guard let object else { return }
            let context = Unmanaged<CallbackContext>.fromOpaque(object).takeUnretainedValue()
            // Clean sessions forget subscriptions: renew them before anyone is told we're connected.
            if rc == 0 {
                for subscription in context.subscriptions {
                    mosquitto_subscribe(mosq, nil, subscription.filter, Int32(subscription.qos))
                }
            }
            context.didConnect(code: rc)
        }
        mosquitto_disconnect_callback_set(mosq) { _, object, rc in
            guard let object else { return }
            Unmanaged<CallbackContext>.fromOpaque(object).takeUnretainedValue().didDisconnect(code: rc)
        }
        mosquitto_publish_callback_set(mosq) { _, object, mid in
            guard let object else { return }
            Unmanaged<CallbackContext>.fromOpaque(object).takeUnretainedValue().didPublish(messageID: mid)
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
            Unmanaged<CallbackContext>.fromOpaque(object).takeUnretainedValue().didReceive(copy)
        }
    }

    /// Starts the network thread and the first connection attempt. A broker that is down is not an
    /// error: libmosquitto keeps trying with backoff and `events` reports `.connected` when it succeeds.
    public func start() throws(MQTTError) {
        guard let mosq = handle.pointer else { throw MQTTError("start", code: Int32(MOSQ_ERR_INVAL.rawValue)) }
        try MQTTError.check(mosquitto_loop_start(mosq), "start network thread")
        let rc = mosquitto_connect_async(mosq, configuration.host, Int32(configuration.port), Int32(configuration.keepalive))
        if rc != Int32(MOSQ_ERR_SUCCESS.rawValue) {
            // The loop thread retries a failed first attempt too; report it so the log says why.
            context.continuation.yield(.disconnected(unexpected: true, reason: MQTTError("connect", code: rc).message))
        }
    }

    /// Whether the broker has accepted the current connection.
    public var isConnected: Bool { context.state.withLock { $0.connected } }

    /// Why the last connection attempt or connection failed, if it did.
    public var lastProblem: String? { context.state.withLock { $0.lastProblem } }

    /// Publishes a message. QoS 1/2 messages are queued by libmosquitto while the broker is away
    /// and sent when it returns.
    /// - Returns: the message id.
    @discardableResult
    public func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32 {
        guard let mosq = handle.pointer else { throw MQTTError("publish", code: Int32(MOSQ_ERR_NO_CONN.rawValue)) }
        var messageID: Int32 = 0
        // The lock spans the call so the ack callback cannot see the id before it is registered.
        let rc = context.state.withLock { state in
            let rc = payload.withUnsafeBytes { bytes in
                mosquitto_publish(mosq, &messageID, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos), retain)
            }
            if rc == Int32(MOSQ_ERR_SUCCESS.rawValue) { state.registerPublished(messageID) }
            return rc
        }
        try MQTTError.check(rc, "publish to \(topic)")
        return messageID
    }

    /// Publishes text.
    public func publish(topic: String, text: String, qos: Int, retain: Bool) throws(MQTTError) {
        try publish(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// Subscribes now (when connected) and again after every reconnect.
    public func subscribe(_ filter: String, qos: Int) throws(MQTTError) {
        guard let mosq = handle.pointer else { throw MQTTError("subscribe", code: Int32(MOSQ_ERR_NO_CONN.rawValue)) }
        let connected = context.state.withLock { state in
            state.subscriptions.removeAll { $0.filter == filter }
            state.subscriptions.append((filter, qos))
            return state.connected
        }
        if connected {
            try MQTTError.check(mosquitto_subscribe(mosq, nil, filter, Int32(qos)), "subscribe to \(filter)")
        }
    }

    /// Stops a subscription, now and for later reconnects.
    public func unsubscribe(_ filter: String) throws(MQTTError) {
        guard let mosq = handle.pointer else { throw MQTTError("unsubscribe", code: Int32(MOSQ_ERR_NO_CONN.rawValue)) }
        let connected = context.state.withLock { state in
            state.subscriptions.removeAll { $0.filter == filter }
            return state.connected
        }
        if connected {
            try MQTTError.check(mosquitto_unsubscribe(mosq, nil, filter), "unsubscribe from \(filter)")
        }
    }

    /// Waits until every message published so far has been handed to the broker (acknowledged for
    /// QoS 1), or `timeout` seconds pass. Returns whether everything went out.
    public func waitForPublished(timeout: Double) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < deadline {
            if context.state.withLock({ $0.pending.isEmpty }) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return context.state.withLock { $0.pending.isEmpty }
    }

    /// Disconnects cleanly (no last will) and stops the network thread. The client can't be
    /// started again.
    public func stop() {
        guard let mosq = handle.pointer else { return }
        mosquitto_disconnect(mosq)
        mosquitto_loop_stop(mosq, false)
        handle.destroy()
        context.continuation.finish()
    }
}

/// What the C callbacks need: the event continuation and state shared with callers.
private final class CallbackContext: Sendable {
    struct State {
        var connected = false
        var lastProblem: String?
        var subscriptions: [(filter: String, qos: Int)] = []
        /// Published message ids not yet acknowledged, and acks that arrived first.
        var pending: Set<Int32> = []
        var ackedEarly: Set<Int32> = []

        mutating func registerPublished(_ id: Int32) {
            if ackedEarly.remove(id) == nil { pending.insert(id) }
        }
    }

    let continuation: AsyncStream<MQTTEvent>.Continuation
    let state = Mutex(State())

    init(continuation: AsyncStream<MQTTEvent>.Continuation) {
        self.continuation = continuation
    }

    func didConnect(code: Int32) {
        guard code == 0 else {
            let reason = String(cString: mosquitto_connack_string(code))
            state.withLock {
                $0.connected = false
                $0.lastProblem = "broker refused: \(reason)"
            }
            continuation.yield(.refused(reason: reason))
            return
        }
        state.withLock {
            $0.connected = true
            $0.lastProblem = nil
        }
        continuation.yield(.connected)
    }

    func didDisconnect(code: Int32) {
        let reason = code == 0 ? "disconnected" : String(cString: mosquitto_strerror(code))
        state.withLock { state in
            state.connected = false
            if code != 0, state.lastProblem == nil { state.lastProblem = reason }
        }
        continuation.yield(.disconnected(unexpected: code != 0, reason: reason))
    }

    func didPublish(messageID: Int32) {
        state.withLock { state in
            if state.pending.remove(messageID) == nil { state.ackedEarly.insert(messageID) }
        }
    }

    func didReceive(_ message: MQTTMessage) {
        continuation.yield(.message(message))
    }

    /// The subscriptions to renew on the network thread right after connecting.
    var subscriptions: [(filter: String, qos: Int)] { state.withLock { $0.subscriptions } }
}

/// Owns the `struct mosquitto *`.
///
/// `@unchecked Sendable` is safe because libmosquitto's client functions are thread-safe (Debian
/// builds it with threading), and the pointer is read and cleared under a lock so it is never
/// used after `mosquitto_destroy`.
private final class MosquittoHandle: @unchecked Sendable {
    private let lock = NSLock()
    private var raw: OpaquePointer?

    init(_ pointer: OpaquePointer) {
        raw = pointer
    }

    var pointer: OpaquePointer? { lock.withLock { raw } }

    func destroy() {
        let pointer = lock.withLock { () -> OpaquePointer? in
            defer { raw = nil }
            return raw
        }
        if let pointer {
            mosquitto_loop_stop(pointer, true)
            mosquitto_destroy(pointer)
        }
    }
}
