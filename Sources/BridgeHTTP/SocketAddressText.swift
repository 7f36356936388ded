import Glibc

/// Turns socket addresses into the text and numbers the rest of the bridge works with.
enum SocketAddressText {
    /// `127.0.0.1` or `::1`; an IPv4-mapped IPv6 address (a v4 client of a dual-stack listener) is shown as
    /// plain IPv4 so that per-client throttling and logs see one spelling per client. Nil for other families.
    static func host(of address: UnsafePointer<sockaddr>) -> String? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let ipv4 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
            return format(ipv4.sin_addr, family: AF_INET)
        case AF_INET6:
            let ipv6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
            let bytes = withUnsafeBytes(of: ipv6.sin6_addr) { Array($0) }
            let isIPv4Mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
            guard isIPv4Mapped else { return format(ipv6.sin6_addr, family: AF_INET6) }
            return bytes[12...].map(String.init).joined(separator: ".")
        default:
            return nil
        }
    }

    /// The port of an IPv4 or IPv6 address in host byte order.
    static func port(of storage: sockaddr_storage) -> Int? {
        withUnsafeBytes(of: storage) { raw in
            switch Int32(storage.ss_family) {
            case AF_INET: Int(UInt16(bigEndian: raw.loadUnaligned(as: sockaddr_in.self).sin_port))
            case AF_INET6: Int(UInt16(bigEndian: raw.loadUnaligned(as: sockaddr_in6.self).sin6_port))
            default: nil
            }
        }
    }

    private static func format<Address>(_ address: Address, family: Int32) -> String? {
        var address = address
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let capacity = socklen_t(buffer.count)
        let result = buffer.withUnsafeMutableBufferPointer { text in
            withUnsafePointer(to: &address) { inet_ntop(family, $0, text.baseAddress, capacity) }
        }
        guard result != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
