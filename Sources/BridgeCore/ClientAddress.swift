/// Who a request comes from, as throttling and the security log see it (README "Security model").
public enum ClientAddress {
    /// The client of `request`: the TCP peer, or, when the peer is one of `trustedProxies`, the
    /// address that proxy reports in `X-Forwarded-For` (the right-most entry not itself a trusted
    /// proxy; proxies append, so entries further left are whatever the client claimed).
    public static func of(_ request: HTTPRequest, trustedProxies: Set<String>) -> String {
        guard trustedProxies.contains(request.clientAddress), let header = request.headers["x-forwarded-for"] else {
            return request.clientAddress
        }
        // At most 32 entries are looked at: the header is bounded by http.max_header_bytes anyway.
        let entries = header.split(separator: ",").suffix(32).map { $0.filter { $0 != " " && $0 != "\t" } }
        for entry in entries.reversed() where !entry.isEmpty && !trustedProxies.contains(entry) {
            return entry
        }
        return request.clientAddress
    }

    /// What per-address limits count: an IPv6 address by its /64 (one machine or household can use any
    /// address in it), anything else as it is.
    public static func throttleKey(_ address: String) -> String {
        guard address.contains(":"), let groups = ipv6Groups(address) else { return address }
        return groups.prefix(4).map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// The eight 16-bit groups of an IPv6 address in text (`2001:db8::1`), nil when it isn't one.
    /// A trailing dotted IPv4 part (`::ffff:1.2.3.4`) is not expanded: such an address is never /64-keyed.
    static func ipv6Groups(_ text: String) -> [UInt16]? {
        let halves = text.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false)
        func parse(_ part: Substring) -> [UInt16]? {
            if part.isEmpty { return [] }
            let groups = part.split(separator: ":", omittingEmptySubsequences: false).map { UInt16($0, radix: 16) }
            return groups.contains(nil) || groups.count > 8 ? nil : groups.compactMap { $0 }
        }
        guard let head = parse(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 8 ? head : nil }
        guard let tail = parse(halves[1]), head.count + tail.count < 8 else { return nil }
        return head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
    }
}
