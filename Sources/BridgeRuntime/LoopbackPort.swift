import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Small socket helpers for services on this machine's loopback interface.
public enum LoopbackPort {
    /// Ports this process has handed out: the OS may offer a port again as soon as its probe
    /// socket is closed, and two servers started side by side must not both be told to use it.
    private static let handedOut = Mutex<Set<Int>>([])

    /// A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it) and that this process
    /// has not handed out before. Another process may take it before the caller binds it, so
    /// callers that start a server check that their own process is the one listening.
    public static func free() -> Int? {
        for _ in 0..<50 {
            guard let port = probe() else { return nil }
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        return nil
    }

    private static func probe() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    public static func isAccepting(port: Int) -> Bool {
        guard let fd = connect(port: port) else { return false }
        close(fd)
        return true
    }

    /// A TCP socket connected to 127.0.0.1:`port`, or `nil`; the caller closes it.
    /// - Parameter configure: socket options to set before connecting (buffer sizes, timeouts).
    public static func connect(port: Int, configure: (Int32) -> Void = { _ in }) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        configure(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Waits until 127.0.0.1:`port` accepts connections or `timeout` seconds pass.
    public static func waitUntilAccepting(port: Int, timeout: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if isAccepting(port: port) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return isAccepting(port: port)
    }
}
