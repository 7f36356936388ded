import CMosquitto
import Foundation
import Synchronization
import Glibc

/// The network thread: one connection attempt after another, with backoff, until stopped;
/// each connection lives by `ConnectionWatchdog`'s rules.
extension MQTTConnection {

    var isStopping: Bool { state.withLock { $0.stopping } }

    func run() {
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

    func finish() {
        state.withLock { state in
            state.phase = .stopped
            state.nextAttemptDelay = nil
        }
        finished.signal()
    }

    /// One connection attempt, and the connection until it ends. The timing rules (CONNACK
    /// timeout, liveness, the stop deadline) are `ConnectionWatchdog`'s; this carries them out.
    func connectAndServe() -> Outcome {
        var watchdog = ConnectionWatchdog(keepalive: configuration.keepalive, now: MQTTConnection.seconds())
        sawInbound()
        state.withLock { state in
            state.phase = .connecting
            state.connack = nil
        }
        let rc = mosquitto_connect_async(mosq, configuration.host, Int32(configuration.port), Int32(configuration.keepalive))
        guard rc == Int32(MOSQ_ERR_SUCCESS.rawValue) else {
            let reason = MQTTConnection.describe(rc)
            state.withLock { $0.phase = .idle }
            return .unreachable(reason)
        }
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
                        state.connack = nil
                    }
                }
                if state.phase == .connected { flush(&state) }
                return promoted
            }
            if promoted {
                watchdog.connected(at: now)
                continuation.yield(.connected)
            }
            for notice in notices { configuration.onNotice?(notice) }
            let failed = rc != Int32(MOSQ_ERR_SUCCESS.rawValue)
            let actions = watchdog.tick(now: now, socketFailed: failed, refusedCode: refused, stopping: isStopping,
                                        lastInbound: Double(lastInbound.load(ordering: .relaxed)) / 1000)
            for action in actions {
                switch action {
                case .closeSocket: closeSocket()
                case .disconnect: mosquitto_disconnect(mosq)
                case .notice(let notice): configuration.onNotice?(notice)
                case .end(let ending): return connectionEnded(ending, rc: rc, wasConnected: watchdog.connectedAt != nil)
                }
            }
        }
    }

    /// The connection is over (closed by either side, refused, or given up on): what the queue
    /// held beyond its capacity while connected is cut back to it now.
    func connectionEnded(_ ending: ConnectionWatchdog.Ending, rc: Int32, wasConnected: Bool) -> Outcome {
        var lostNotices: [MQTTNotice] = []
        state.withLock { state in
            if wasConnected { state.redeliveries.connectionLost() }
            state.phase = .idle
            let dropped = state.outbox.trim()
            if dropped > 0 { state.noteDropped(dropped, notices: &lostNotices) }
        }
        for notice in lostNotices { configuration.onNotice?(notice) }
        switch ending {
        case .stopped(let wasConnected): return .stopped(wasConnected: wasConnected)
        case .refused(let code): return .refused(MQTTConnection.connackReason(code))
        case .noConnack(let seconds): return .noConnack(seconds)
        case .dead(let silence, let connectedFor):
            return .lost("no answer from the broker for \(MQTTConnection.format(silence)) s "
                + "(keepalive \(configuration.keepalive) s)", connectedFor: connectedFor)
        case .closed(let connectedFor?): return .lost(MQTTConnection.describe(rc), connectedFor: connectedFor)
        case .closed(nil): return .unreachable(MQTTConnection.describe(rc))
        }
    }

    /// Hands queued messages to libmosquitto, oldest first, while fewer than `maxInflight` wait
    /// for their acknowledgement.
    func flush(_ state: inout State) {
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
    func closeSocket() {
        let socket = mosquitto_socket(mosq)
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    /// Before the first connection of a client with a persistent session: connects once with a
    /// clean session and disconnects, so the broker discards a session left by an earlier run
    /// (and the messages queued in it). Returns nil on success.
    func startWithFreshSession() -> Outcome? {
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
