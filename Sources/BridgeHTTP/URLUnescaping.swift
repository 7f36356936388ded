import CMicroHTTPD

/// Percent-decoding of the request path and query, in place, as libmicrohttpd's own `%HH` decoder does, but
/// noticing `%00`: MHD hands the path to the access handler as a C string, so a NUL would silently cut it
/// (`/index.html%00.png` would arrive as `/index.html`). A request with one is refused with 400 instead
/// (README "HTTP").
enum URLUnescaping {
    /// Decodes `%HH` sequences of the NUL-terminated `text`; returns the new length and whether a NUL was decoded.
    static func decode(_ text: UnsafeMutablePointer<UInt8>) -> (length: Int, decodedNUL: Bool) {
        var read = 0
        var write = 0
        var decodedNUL = false
        while text[read] != 0 {
            // A hex digit is never the terminator, so `read + 2` is still inside the string when `high` is one.
            if text[read] == UInt8(ascii: "%"), let high = hexValue(text[read + 1]), let low = hexValue(text[read + 2]) {
                let byte = high << 4 | low
                decodedNUL = decodedNUL || byte == 0
                text[write] = byte
                read += 3
            } else {
                text[write] = text[read]
                read += 1
            }
            write += 1
        }
        text[write] = 0
        return (write, decodedNUL)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// `MHD_OPTION_UNESCAPE_CALLBACK`: decodes in place and tells the dispatcher about a decoded NUL.
func mhdUnescape(cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, text: UnsafeMutablePointer<CChar>?) -> Int {
    guard let text else { return 0 }
    let decoded = text.withMemoryRebound(to: UInt8.self, capacity: 1) { URLUnescaping.decode($0) }
    if decoded.decodedNUL, let cls, let connection {
        Unmanaged<RequestDispatcher>.fromOpaque(cls).takeUnretainedValue().requestHasNUL(UInt(bitPattern: connection))
    }
    return decoded.length
}
