/// The names a browser may use to reach the bridge, checked against every request's `Host` header
/// (README "HTTP", "Host names"). A page on another site that makes its own name resolve to the
/// bridge's address (DNS rebinding) still sends its own name as the host, and is answered 421.
public struct HostAllowList: Sendable, Equatable {
    /// Lower-case host names and addresses without port or brackets; `nil` accepts any host (`*`).
    public let hosts: Set<String>?

    /// The names loopback clients use, always allowed unless the list is given explicitly.
    public static let loopbackNames = ["localhost", "127.0.0.1", "::1"]

    /// - Parameters:
    ///   - configured: `http.allowed_hosts`, comma separated, or `nil` for the default: the loopback
    ///     names and the bind address (unless it is a wildcard). `*` allows any host.
    ///   - bind: `http.bind`.
    public init(configured: String?, bind: String) {
        if let configured {
            let names = configured.split(separator: ",").map { Self.normalized(String($0)) }.filter { !$0.isEmpty }
            hosts = names.contains("*") ? nil : Set(names)
        } else {
            var names = Set(Self.loopbackNames)
            if !Self.isWildcard(bind) { names.insert(Self.normalized(bind)) }
            hosts = names
        }
    }

    /// Whether a request with this `Host` header (`name`, `name:port`, `[::1]:8080`) is answered.
    /// A missing header is allowed: only HTTP/1.0 clients omit it, and browsers always send one.
    public func allows(hostHeader: String?) -> Bool {
        guard let hosts, let header = hostHeader else { return true }
        // The allowed names are normalised, so a name found as it was sent needs no normalising: the usual
        // case, on every request, found by comparing bytes, without making a string or hashing one.
        if hosts.count <= Self.comparedByBytes, Self.sentAsAllowed(header, hosts) { return true }
        let name = Self.stripPort(header)
        return hosts.contains(name) || hosts.contains(Self.normalized(name))
    }

    /// Up to this many allowed names, a header is compared with each; a longer list is hashed instead.
    private static let comparedByBytes = 8

    /// Whether the header's name, as `stripPort` would find it, is one of `hosts` byte for byte. False when
    /// there are spaces to trim, or the bytes can't be read in place: then the general path decides.
    private static func sentAsAllowed(_ header: String, _ hosts: Set<String>) -> Bool {
        header.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard let name = nameRange(bytes) else { return false }
            let sent = UnsafeBufferPointer(rebasing: bytes[name])
            return hosts.contains { allowed in
                allowed.utf8.withContiguousStorageIfAvailable { $0.elementsEqual(sent) } ?? false
            }
        } ?? false
    }

    /// `stripPort` on bytes, for a header with nothing to trim (nil otherwise).
    private static func nameRange(_ bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.first, let last = bytes.last, !isSpace(first), !isSpace(last) else { return nil }
        if first == UInt8(ascii: "["), let close = bytes.firstIndex(of: UInt8(ascii: "]")) { return 1..<close }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              !bytes[(colon + 1)...].contains(UInt8(ascii: ":")) else { return 0..<bytes.count }
        return 0..<colon
    }

    /// Whether the address listens beyond this machine (`0.0.0.0`, `::`, or a non-loopback address).
    public static func reachesBeyondLoopback(bind: String) -> Bool {
        !(bind == "::1" || bind == "localhost" || bind.hasPrefix("127."))
    }

    static func isWildcard(_ bind: String) -> Bool { bind == "0.0.0.0" || bind == "::" }

    /// Runs on every request, so it scans UTF-8 bytes rather than characters (`[`, `]` and `:` are ASCII
    /// and never occur inside a multi-byte character).
    private static func stripPort(_ header: String) -> String {
        let text = header.trimmingSpaces
        let bytes = text.utf8
        if bytes.first == UInt8(ascii: "["), let close = bytes.firstIndex(of: UInt8(ascii: "]")) {
            return String(text[bytes.index(after: bytes.startIndex)..<close])
        }
        // One colon: name:port. More than one without brackets: a bare IPv6 address (not valid in Host, kept whole).
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              !bytes[bytes.index(after: colon)...].contains(UInt8(ascii: ":")) else { return text }
        return String(text[..<colon])
    }

    private static func normalized(_ name: String) -> String {
        var text = name.trimmingSpaces.lowercased()
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if text.hasSuffix("."), text.count > 1 { text.removeLast() }  // "localhost." is "localhost"
        return text
    }
}

extension String {
    /// Without leading and trailing spaces and tabs. Runs on every request (the `Host` check), so it
    /// works on UTF-8 bytes and returns `self` untouched in the usual case of nothing to trim.
    fileprivate var trimmingSpaces: String {
        let bytes = utf8
        func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = bytes.lastIndex(where: { !isSpace($0) })!
        if first == bytes.startIndex, bytes.index(after: last) == bytes.endIndex { return self }
        return String(self[first...last])
    }
}
