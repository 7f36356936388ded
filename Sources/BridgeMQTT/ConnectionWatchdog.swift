/// The rules one connection attempt lives by, decided tick by tick without I/O (the network
/// thread turns the actions into libmosquitto calls): give up on a broker that took the TCP
/// connection but never answered CONNECT within `connackTimeout`; take a connection from which
/// nothing came for 1.5 × keepalive as dead; close a refused connection if the broker does not;
/// and when stopping, disconnect cleanly, but never wait more than a second for it.
struct ConnectionWatchdog {
    /// Why the connection attempt (or the connection) ended.
    enum Ending: Equatable {
        /// `stop()` was called.
        case stopped(wasConnected: Bool)
        /// The broker answered CONNECT with a refusal (the CONNACK return code).
        case refused(code: Int32)
        /// No CONNACK within this many seconds.
        case noConnack(seconds: Double)
        /// Nothing came from the broker for `silence` seconds while connected.
        case dead(silence: Double, connectedFor: Double)
        /// The socket failed or was closed (libmosquitto's reason is the caller's): after
        /// `connectedFor` seconds connected, or before the broker accepted at all (nil).
        case closed(connectedFor: Double?)
    }

    /// What the network thread does on this tick, in order.
    enum Action: Equatable {
        /// Shut the socket down under libmosquitto: it reports the connection lost on its next read.
        case closeSocket
        /// Send a clean DISCONNECT (no last will).
        case disconnect
        /// Report something worth a log line.
        case notice(MQTTNotice)
        /// The attempt is over; nothing more happens on this connection.
        case end(Ending)
    }

    /// How long a forced close may take before the attempt is given up anyway.
    static let forcedCloseGrace = 2.0
    /// How long a clean disconnect may take when stopping.
    static let stopGrace = 1.0

    let keepalive: Int
    let connackTimeout: Double
    let attemptStarted: Double
    private(set) var connectedAt: Double?
    private var forced: (ending: Ending, at: Double)?
    private var stopDeadline: Double?

    /// - Parameters:
    ///   - keepalive: the MQTT keepalive in seconds; CONNACK is awaited that long, at least 5 s.
    ///   - now: when the attempt started (seconds on a monotonic clock).
    init(keepalive: Int, now: Double) {
        self.keepalive = keepalive
        connackTimeout = max(Double(keepalive), 5)
        attemptStarted = now
    }

    /// The broker accepted the connection.
    mutating func connected(at now: Double) {
        connectedAt = now
    }

    /// Decides one tick.
    /// - Parameters:
    ///   - now: seconds on the monotonic clock.
    ///   - socketFailed: libmosquitto's loop reported the connection gone.
    ///   - refusedCode: a CONNACK refusal that arrived on this tick, if one did.
    ///   - stopping: `stop()` has been called.
    ///   - lastInbound: when anything last came from the broker.
    mutating func tick(now: Double, socketFailed: Bool, refusedCode: Int32?, stopping: Bool,
                       lastInbound: Double) -> [Action] {
        var actions: [Action] = []
        if let refusedCode, forced == nil {
            forced = (.refused(code: refusedCode), now)
            if !socketFailed { actions.append(.closeSocket) }
        }
        if socketFailed || (forced.map { now - $0.at > Self.forcedCloseGrace } ?? false) {
            if stopDeadline != nil { return actions + [.end(.stopped(wasConnected: connectedAt != nil))] }
            if let forced { return actions + [.end(forced.ending)] }
            return actions + [.end(.closed(connectedFor: connectedAt.map { now - $0 }))]
        }
        if let stopDeadline {
            if now > stopDeadline { actions.append(.closeSocket) }
            return actions
        }
        if stopping {
            actions.append(connectedAt != nil ? .disconnect : .closeSocket)
            stopDeadline = now + Self.stopGrace
            return actions
        }
        guard forced == nil else { return actions }
        if let connectedAt {
            let silence = now - lastInbound
            if silence > 1.5 * Double(keepalive) {
                forced = (.dead(silence: silence, connectedFor: now - connectedAt), now)
                actions += [.notice(.deadConnection(silence: silence, keepalive: keepalive)), .closeSocket]
            }
        } else if now - attemptStarted > connackTimeout {
            forced = (.noConnack(seconds: connackTimeout), now)
            actions += [.notice(.noConnack(seconds: connackTimeout)), .closeSocket]
        }
        return actions
    }
}
