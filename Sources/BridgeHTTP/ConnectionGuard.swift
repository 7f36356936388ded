import Glibc
import Synchronization

/// Applies `ConnectionAdmission` to the daemon's real connections: MHD's connection-notify callback reports
/// each connection's start and end, each connection keeps its head's state in its own `HeadClock` (the access
/// handler and the request-completed callback write it), which is read in before every decision, and a
/// watchdog thread closes connections whose head deadline has passed.
///
/// A connection is closed by `shutdown(2)` on its socket: MHD then reads end-of-file and closes it on its own
/// thread, the only one that may. The socket stays valid while it is tracked, because MHD calls the close
/// notification (which removes it, under the same lock) before it closes the socket.
final class ConnectionGuard: Sendable {
    private struct Tracked: Sendable {
        let socket: Int32
        let head: HeadClock
    }

    private struct State: Sendable {
        var admission: ConnectionAdmission
        var tracked: [UInt: Tracked] = [:]
    }

    private let state: Mutex<State>
    private let watchdog = Mutex<WatchdogThread?>(nil)

    init(limits: ConnectionAdmission.Limits) {
        state = Mutex(State(admission: ConnectionAdmission(limits: limits)))
    }

    /// A connection arrived; closes it (or the one it displaces) when the rules say so. `head` started when
    /// the connection did.
    func started(_ id: UInt, address: String, socket: Int32, head: HeadClock) {
        state.withLock { state in
            // Also swept here, so deadlines hold even if the watchdog thread could not start; the heads are
            // read in first, so the connection displaced is chosen on where each head stands now.
            Self.closeExpired(&state)
            switch state.admission.connectionStarted(id, address: address, now: head.current.started) {
            case .admit:
                state.tracked[id] = Tracked(socket: socket, head: head)
            case .refuse:
                Self.close(socket)
            case .admitDisplacing(let other):
                state.tracked[id] = Tracked(socket: socket, head: head)
                if let victim = state.tracked[other] { Self.close(victim.socket) }
            }
        }
    }

    func closed(_ id: UInt) {
        state.withLock { state in
            state.admission.connectionClosed(id)
            state.tracked[id] = nil
        }
    }

    /// Connections the rules currently count (for tests and logs).
    var count: Int { state.withLock { $0.admission.count } }

    /// Closes every connection whose head deadline has passed.
    func sweep() {
        state.withLock { Self.closeExpired(&$0) }
    }

    private static func closeExpired(_ state: inout State) {
        for (id, tracked) in state.tracked {
            let head = tracked.head.current
            state.admission.observeHead(id, startedAt: head.started, complete: head.complete)
        }
        for id in state.admission.expired(now: HeadClock.now()) {
            if let tracked = state.tracked[id] { close(tracked.socket) }
        }
    }

    /// Starts the thread that sweeps a few times a second, so a deadline is kept to within a quarter second.
    func startWatchdog() {
        watchdog.withLock { running in
            guard running == nil else { return }
            running = WatchdogThread(interval: 0.25) { [self] in sweep() }
        }
    }

    /// Stops the watchdog thread and waits for it.
    func stopWatchdog() {
        let running = watchdog.withLock { running in
            defer { running = nil }
            return running
        }
        running?.stop()
    }

    private static func close(_ socket: Int32) {
        _ = Glibc.shutdown(socket, Int32(SHUT_RDWR))
    }
}

/// A pthread running `tick` every `interval` seconds until `stop()`, which joins it.
///
/// `@unchecked Sendable` because `pthread_t` is a plain integer handle that Swift does not mark Sendable; it is
/// written once in `init` and read once in `stop()`, which `ConnectionGuard` calls at most once per thread.
private final class WatchdogThread: @unchecked Sendable {
    private final class Context: Sendable {
        let interval: Double
        let tick: @Sendable () -> Void
        let stopping = Atomic<Bool>(false)

        init(interval: Double, tick: @escaping @Sendable () -> Void) {
            self.interval = interval
            self.tick = tick
        }
    }

    private let context: Context
    private var thread = pthread_t()
    private let started: Bool

    init(interval: Double, tick: @escaping @Sendable () -> Void) {
        context = Context(interval: interval, tick: tick)
        // Released by the thread when it ends.
        let retained = Unmanaged.passRetained(context).toOpaque()
        started = pthread_create(&thread, nil, { argument in
            guard let argument else { return nil }
            let context = Unmanaged<Context>.fromOpaque(argument).takeRetainedValue()
            let pause = useconds_t(context.interval * 1_000_000)
            while !context.stopping.load(ordering: .acquiring) {
                usleep(pause)
                context.tick()
            }
            return nil
        }, retained) == 0
        if !started { Unmanaged<Context>.fromOpaque(retained).release() }
    }

    func stop() {
        context.stopping.store(true, ordering: .releasing)
        if started { pthread_join(thread, nil) }
    }
}
