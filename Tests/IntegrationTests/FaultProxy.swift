import BridgeRuntime
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 between a client (the bridge) and a server (the broker) that injects
/// network faults, switchable at run time (there is no netem or toxiproxy on our machines).
///
/// One thread runs a `poll` loop over every connection; it is bounded (`maxConnections`, 256 KiB
/// waiting per direction, after which it stops reading) and ends by itself after `lifetime`
/// seconds or when the proxy is stopped or released.
final class FaultProxy: @unchecked Sendable {
    enum Mode: Sendable, Equatable {
        /// Forward everything at once.
        case pass
        /// Forward every chunk `seconds` after it arrived.
        case delay(Double)
        /// Accept connections but forward nothing, in either direction, as a link that silently
        /// drops everything would. Data waits (as in a partition, where TCP retransmits), and
        /// flows again after the mode changes; a connection the client closes meanwhile is dropped.
        case blackhole
        /// Reset every connection (RST, both sides), and every new one while in this mode.
        case reset
        /// Let each connection carry `bytes` more bytes (both directions together), then close it.
        case closeAfter(Int)
    }

    let port: Int
    let upstreamPort: Int
    private let control: Mutex<Control>
    private let listener: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    private struct Control {
        var mode = Mode.pass
        var generation = 0
        var stopped = false
        var accepted = 0
        var forwarded = 0
    }

    static let maxConnections = 64
    /// Linux's POLLRDHUP (the peer closed its end), which Glibc's Swift overlay does not export.
    static let POLLRDHUP: Int32 = 0x2000
    static let bufferLimit = 256 * 1024

    /// Starts listening on a free loopback port and forwarding to 127.0.0.1:`upstreamPort`.
    init(upstreamPort: Int, lifetime: Double = 900) throws {
        self.upstreamPort = upstreamPort
        control = Mutex(Control())
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw TestFailure("fault proxy: no pipe") }
        wakeRead = pipeEnds[0]
        wakeWrite = pipeEnds[1]
        FaultProxy.setNonBlocking(wakeRead)
        FaultProxy.setNonBlocking(wakeWrite)
        var listening: (fd: Int32, port: Int)?
        for _ in 0..<5 {
            guard let candidate = LoopbackPort.free() else { continue }
            if let fd = FaultProxy.listen(port: candidate) {
                listening = (fd, candidate)
                break
            }
        }
        guard let listening else {
            Glibc.close(wakeRead)
            Glibc.close(wakeWrite)
            throw TestFailure("fault proxy: no free port")
        }
        listener = listening.fd
        port = listening.port
        let deadline = FaultProxy.now() + lifetime
        let thread = Thread { [self] in run(until: deadline) }
        thread.name = "fault-proxy"
        thread.start()
    }

    deinit {
        stop()
    }

    /// What the proxy does now; setting it applies to existing connections too.
    var mode: Mode {
        get { control.withLock { $0.mode } }
        set {
            control.withLock {
                $0.mode = newValue
                $0.generation += 1
            }
            wake()
        }
    }

    /// Connections accepted so far.
    var accepted: Int { control.withLock { $0.accepted } }

    /// Stops the proxy: closes the listener and every connection (the thread ends within a tick).
    func stop() {
        let first = control.withLock { control -> Bool in
            defer { control.stopped = true }
            return !control.stopped
        }
        if first { wake() }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    // MARK: The proxy thread

    private final class Pair {
        let client: Int32
        var upstream: Int32 = -1
        var toUpstream = Direction()
        var toClient = Direction()
        /// Bytes this connection may still carry (`closeAfter`).
        var budget: Int?

        init(client: Int32) {
            self.client = client
        }
    }

    private struct Direction {
        var chunks: [(due: Double, bytes: [UInt8])] = []
        var waiting = 0
        var ended = false

        func hasDue(_ now: Double) -> Bool { chunks.first.map { $0.due <= now } ?? false }
    }

    private func run(until deadline: Double) {
        var pairs: [Pair] = []
        var generation = -1
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        defer {
            for pair in pairs { FaultProxy.close(pair, reset: false) }
            Glibc.close(listener)
            Glibc.close(wakeRead)
            Glibc.close(wakeWrite)
        }
        while FaultProxy.now() < deadline {
            let (mode, currentGeneration, stopped) = control.withLock { ($0.mode, $0.generation, $0.stopped) }
            if stopped { return }
            if currentGeneration != generation {
                generation = currentGeneration
                switch mode {
                case .reset:
                    for pair in pairs { FaultProxy.close(pair, reset: true) }
                    pairs.removeAll()
                case .closeAfter(let bytes):
                    for pair in pairs { pair.budget = bytes }
                default:
                    for pair in pairs { pair.budget = nil }
                }
            }
            let forwarding = mode != .blackhole
            let delay: Double = if case .delay(let seconds) = mode { seconds } else { 0 }
            let now = FaultProxy.now()

            // Connections accepted during a blackhole reach the server once it ends.
            if forwarding {
                pairs.removeAll { pair in
                    guard pair.upstream < 0 else { return false }
                    guard let upstream = LoopbackPort.connect(port: upstreamPort) else {
                        FaultProxy.close(pair, reset: false)
                        return true
                    }
                    FaultProxy.setNonBlocking(upstream)
                    pair.upstream = upstream
                    return false
                }
            }

            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            var nextDue = now + 0.1
            for pair in pairs {
                var clientEvents = FaultProxy.POLLRDHUP
                var upstreamEvents: Int32 = 0
                if forwarding {
                    if !pair.toUpstream.ended, pair.toUpstream.waiting < FaultProxy.bufferLimit { clientEvents |= Int32(POLLIN) }
                    if pair.toClient.hasDue(now) { clientEvents |= Int32(POLLOUT) }
                    if !pair.toClient.ended, pair.toClient.waiting < FaultProxy.bufferLimit { upstreamEvents |= Int32(POLLIN) }
                    if pair.toUpstream.hasDue(now) { upstreamEvents |= Int32(POLLOUT) }
                    for due in [pair.toUpstream.chunks.first?.due, pair.toClient.chunks.first?.due].compactMap({ $0 })
                    where due > now {
                        nextDue = min(nextDue, due)
                    }
                }
                fds.append(pollfd(fd: pair.client, events: Int16(truncatingIfNeeded: clientEvents), revents: 0))
                fds.append(pollfd(fd: forwarding ? pair.upstream : -1, events: Int16(upstreamEvents), revents: 0))
            }
            let timeout = Int32(max(1, min(100, (nextDue - now) * 1000)))
            guard poll(&fds, nfds_t(fds.count), timeout) >= 0 || errno == EINTR else { return }
            if fds[1].revents != 0 {
                while read(wakeRead, &buffer, buffer.count) > 0 {}
                continue  // the mode may have changed: look again before moving data
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                while true {
                    let client = accept(listener, nil, nil)
                    guard client >= 0 else { break }
                    control.withLock { $0.accepted += 1 }
                    FaultProxy.setNonBlocking(client)
                    let pair = Pair(client: client)
                    if mode == .reset || pairs.count >= FaultProxy.maxConnections {
                        FaultProxy.close(pair, reset: true)
                        continue
                    }
                    if case .closeAfter(let bytes) = mode { pair.budget = bytes }
                    pairs.append(pair)
                }
            }
            let after = FaultProxy.now()
            var closing: Set<ObjectIdentifier> = []
            for (index, pair) in pairs.enumerated() where index * 2 + 3 < fds.count {
                let clientEvents = Int32(fds[index * 2 + 2].revents)
                let upstreamEvents = Int32(fds[index * 2 + 3].revents)
                if !forwarding {
                    // A blackholed connection the client gave up on is dropped with what it held.
                    if clientEvents & (FaultProxy.POLLRDHUP | Int32(POLLHUP | POLLERR)) != 0 { closing.insert(ObjectIdentifier(pair)) }
                    continue
                }
                var healthy = true
                if clientEvents & (FaultProxy.POLLRDHUP | Int32(POLLIN | POLLHUP)) != 0 {
                    healthy = receive(from: pair.client, into: &pair.toUpstream, due: after + delay, buffer: &buffer) && healthy
                }
                if upstreamEvents & (FaultProxy.POLLRDHUP | Int32(POLLIN | POLLHUP)) != 0 {
                    healthy = receive(from: pair.upstream, into: &pair.toClient, due: after + delay, buffer: &buffer) && healthy
                }
                if clientEvents & Int32(POLLERR) != 0 || upstreamEvents & Int32(POLLERR) != 0 { healthy = false }
                if healthy { healthy = send(pair, from: \.toUpstream, to: pair.upstream, now: after) }
                if healthy { healthy = send(pair, from: \.toClient, to: pair.client, now: after) }
                if let budget = pair.budget, budget <= 0 { healthy = false }
                // Ended on one side and everything it sent passed on: close both.
                let drained = (pair.toUpstream.ended && pair.toUpstream.chunks.isEmpty)
                    || (pair.toClient.ended && pair.toClient.chunks.isEmpty)
                if !healthy || drained { closing.insert(ObjectIdentifier(pair)) }
            }
            pairs.removeAll { pair in
                guard closing.contains(ObjectIdentifier(pair)) else { return false }
                FaultProxy.close(pair, reset: false)
                return true
            }
        }
    }

    /// Reads what is there; false when the socket failed.
    private func receive(from fd: Int32, into direction: inout Direction, due: Double, buffer: inout [UInt8]) -> Bool {
        guard !direction.ended else { return true }
        let count = read(fd, &buffer, buffer.count)
        if count > 0 {
            direction.chunks.append((due, Array(buffer[0..<count])))
            direction.waiting += count
            return true
        }
        if count == 0 {
            direction.ended = true
            return true
        }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
    }

    /// Writes the chunks that are due, within the connection's budget; false when the socket failed.
    private func send(_ pair: Pair, from path: ReferenceWritableKeyPath<Pair, Direction>, to fd: Int32, now: Double) -> Bool {
        while let chunk = pair[keyPath: path].chunks.first, chunk.due <= now {
            var bytes = chunk.bytes
            if let budget = pair.budget { bytes = Array(bytes.prefix(budget)) }
            if bytes.isEmpty { return false }
            let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
            control.withLock { $0.forwarded += written }
            if let budget = pair.budget { pair.budget = budget - written }
            pair[keyPath: path].waiting -= written
            if written == chunk.bytes.count {
                pair[keyPath: path].chunks.removeFirst()
            } else {
                pair[keyPath: path].chunks[0].bytes.removeFirst(written)
                if pair.budget.map({ $0 <= 0 }) ?? false { return false }
                return true  // the socket is full: the rest waits for POLLOUT
            }
        }
        return true
    }

    // MARK: Sockets

    private static func listen(port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, 64) == 0 else {
            Glibc.close(fd)
            return nil
        }
        setNonBlocking(fd)
        return fd
    }

    static func setNonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    private static func close(_ pair: Pair, reset: Bool) {
        for fd in [pair.client, pair.upstream] where fd >= 0 {
            if reset {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            }
            Glibc.close(fd)
        }
    }

    static func now() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
