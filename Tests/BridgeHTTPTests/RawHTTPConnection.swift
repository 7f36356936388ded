import Glibc
import Foundation

/// A blocking TCP client for talking to the server byte by byte, including bytes no HTTP client would send.
final class RawHTTPConnection {
    private let descriptor: Int32

    /// Connects to `host`:`port` (IPv4 or IPv6 literal), from the IPv4 `source` address when one is given
    /// (any of 127.0.0.0/8 works on Linux, which lets a test play several clients); nil when refused.
    init?(host: String = "127.0.0.1", port: Int, source: String? = nil) {
        var ipv4 = sockaddr_in()
        var ipv6 = sockaddr_in6()
        let isIPv6 = inet_pton(AF_INET, host, &ipv4.sin_addr) != 1
        if isIPv6 {
            guard inet_pton(AF_INET6, host, &ipv6.sin6_addr) == 1 else { return nil }
            ipv6.sin6_family = sa_family_t(AF_INET6)
            ipv6.sin6_port = UInt16(port).bigEndian
        } else {
            ipv4.sin_family = sa_family_t(AF_INET)
            ipv4.sin_port = UInt16(port).bigEndian
        }
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        descriptor = socket(isIPv6 ? AF_INET6 : AF_INET, type, 0)
        guard descriptor >= 0 else { return nil }
        // Only a safety net so that a server that never answers fails the test instead of hanging it.
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let source, !isIPv6 {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            guard inet_pton(AF_INET, source, &local.sin_addr) == 1, Self.bind(descriptor, to: &local) else {
                close(descriptor)
                return nil
            }
        }
        let connected = isIPv6 ? Self.connect(descriptor, to: &ipv6) : Self.connect(descriptor, to: &ipv4)
        guard connected else {
            close(descriptor)
            return nil
        }
    }

    deinit {
        close(descriptor)
    }

    /// Sends everything; false once the server has closed or reset the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool {
        send(Array(text.utf8))
    }

    /// Reads until the server closes the connection (or resets it, or the safety timeout passes).
    func readToEnd() -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return received }
            received.append(contentsOf: buffer[..<count])
        }
    }

    /// Reads what the server sends back and parses it as one response; nil when nothing parseable arrived.
    func readResponse() -> RawHTTPResponse? {
        RawHTTPResponse(parsing: readToEnd())
    }

    /// One byte, or nil once the connection is closed (or the safety timeout passes).
    func readByte() -> UInt8? {
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, 0) == 1 ? byte : nil
    }

    /// Whether the server has closed the connection: a read finds end-of-file or an error rather than data or
    /// nothing yet (waits at most `seconds`).
    func isClosedByServer(within seconds: Int) -> Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1000)) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
    }

    private static func bind(_ descriptor: Int32, to address: inout sockaddr_in) -> Bool {
        withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func connect<Address>(_ descriptor: Int32, to address: inout Address) -> Bool {
        withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<Address>.size)) == 0
            }
        }
    }
}

/// An HTTP/1.1 response as read off the wire.
struct RawHTTPResponse {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    /// Parses a status line, headers and a Content-Length body; nil when the bytes are not an HTTP response.
    init?(parsing bytes: [UInt8]) {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else { return nil }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            return nil
        }
        self.status = status
        headers = lines.dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        body = Array(bytes[(end + separator.count)...])
        if let length = headers.first(where: { $0.name.lowercased() == "content-length" }).flatMap({ Int($0.value) }) {
            body = Array(body.prefix(length))
        }
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var bodyText: String { String(decoding: body, as: UTF8.self) }
}
