import Glibc

/// A TCP socket bound to the configured address and listening, ready to hand to libmicrohttpd.
///
/// BridgeHTTP binds the socket itself (instead of letting MHD do it) so that the exact address is honoured for
/// both families, `::` can be made dual stack explicitly, and a bind failure carries the real `errno`.
struct ListeningSocket {
    let descriptor: Int32
    /// The port actually bound, which differs from the requested one when that was 0.
    let port: Int
    let isIPv6: Bool
    /// True for the IPv6 wildcard `::`, which also accepts IPv4 clients as IPv4-mapped addresses.
    let isDualStack: Bool
    /// Names the socket itself rather than its descriptor number, which the kernel reuses once it is closed.
    private let identity: FileIdentity

    /// Creates, binds and listens. On success the caller owns `descriptor`.
    static func open(address: String, port: Int) throws(HTTPServerError) -> ListeningSocket {
        func failure(_ reason: String) -> HTTPServerError {
            .cannotListen(on: address, port: port, reason)
        }
        func systemFailure() -> HTTPServerError {
            failure(String(cString: strerror(errno)))
        }
        guard let portNumber = UInt16(exactly: port) else {
            throw failure("port must be between 0 and 65535")
        }

        var ipv4 = sockaddr_in()
        var ipv6 = sockaddr_in6()
        let isIPv6: Bool
        if inet_pton(AF_INET, address, &ipv4.sin_addr) == 1 {
            ipv4.sin_family = sa_family_t(AF_INET)
            ipv4.sin_port = portNumber.bigEndian
            isIPv6 = false
        } else if inet_pton(AF_INET6, address, &ipv6.sin6_addr) == 1 {
            ipv6.sin6_family = sa_family_t(AF_INET6)
            ipv6.sin6_port = portNumber.bigEndian
            isIPv6 = true
        } else {
            throw failure("not a numeric IPv4 or IPv6 address")
        }
        let isDualStack = isIPv6 && withUnsafeBytes(of: ipv6.sin6_addr) { $0.allSatisfy { $0 == 0 } }

        // Non-blocking because every thread of MHD's pool polls this one socket and may lose the race to accept.
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let descriptor = socket(isIPv6 ? AF_INET6 : AF_INET, type, 0)
        guard descriptor >= 0 else { throw systemFailure() }

        // SO_REUSEADDR only lets a restarted bridge rebind while old connections sit in TIME_WAIT;
        // on Linux it does not let two live listeners share a port.
        var enabled: Int32 = 1
        var v6Only: Int32 = isDualStack ? 0 : 1
        let optionSize = socklen_t(MemoryLayout<Int32>.size)
        var succeeded = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &enabled, optionSize) == 0
        if succeeded && isIPv6 {
            succeeded = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &v6Only, optionSize) == 0
        }
        if succeeded {
            succeeded = isIPv6
                ? bindAddress(&ipv6, to: descriptor) == 0
                : bindAddress(&ipv4, to: descriptor) == 0
        }
        if succeeded {
            succeeded = listen(descriptor, SOMAXCONN) == 0
        }
        guard succeeded, let boundPort = localPort(of: descriptor), let identity = FileIdentity(descriptor) else {
            let error = systemFailure()
            Glibc.close(descriptor)
            throw error
        }
        return ListeningSocket(
            descriptor: descriptor, port: boundPort, isIPv6: isIPv6, isDualStack: isDualStack, identity: identity)
    }

    /// Closes the socket after `MHD_start_daemon` failed with it.
    ///
    /// MHD closes an adopted listen socket itself when it fails after adopting it (epoll, eventfd or thread
    /// creation) but not when it rejects the options first, so the socket is closed only if the descriptor
    /// still names this very socket: once MHD has closed it, another thread may already own that number.
    func closeAfterFailedStart() {
        if FileIdentity(descriptor) == identity {
            Glibc.close(descriptor)
        }
    }

    private static func bindAddress<Address>(_ address: inout Address, to descriptor: Int32) -> Int32 {
        withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<Address>.size))
            }
        }
    }

    private static func localPort(of descriptor: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0 else { return nil }
        return SocketAddressText.port(of: storage)
    }
}

/// The device and inode of an open file, which stay unique for as long as the file is open.
private struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    init?(_ descriptor: Int32) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }
}
