/// An HTTP request as the routing code sees it: already parsed by the server library.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, percent-decoded by the server.
    public var path: String
    /// Query parameters in the order received.
    public var query: [(name: String, value: String)]
    /// Looked up by lower-case name.
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// The client's address as text (`127.0.0.1`), for throttling and logs.
    public var clientAddress: String

    public init(
        method: String,
        path: String,
        query: [(name: String, value: String)] = [],
        headers: HTTPHeaders = [:],
        body: [UInt8] = [],
        clientAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.clientAddress = clientAddress
    }

    /// The first value of a query parameter.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }
}

/// A request's headers as they arrived, looked up by lower-case name; repeated ones are joined the way
/// HTTP allows (`a, b`; cookies with `; `). A list rather than a dictionary: a request carries a dozen
/// headers and a route reads one or two, so scanning them costs less than hashing every name on
/// every request (docs/performance.md, "Prepared responses").
public struct HTTPHeaders: Sendable, ExpressibleByDictionaryLiteral {
    private var fields: [(name: String, value: String)]

    /// Names as sent, in arrival order.
    public init(_ fields: [(name: String, value: String)]) {
        self.fields = fields
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The value of the header named `lowercasedName` (which must be in lower case: another name finds
    /// nothing), every occurrence joined.
    public subscript(lowercasedName: String) -> String? {
        guard !lowercasedName.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
            return nil
        }
        var found: String?
        for field in fields where HTTPHeaderName.equal(field.name, lowercasedName) {
            if let earlier = found {
                found = earlier + (lowercasedName == "cookie" ? "; " : ", ") + field.value
            } else {
                found = field.value
            }
        }
        return found
    }
}

/// Where a streamed response body goes (Server-Sent Events). The server adapter provides it; any
/// thread may write. Writes never block: past the adapter's buffer limit they fail.
public protocol HTTPStreamSink: AnyObject, Sendable {
    /// Queues bytes for the client. Returns false when the client is gone or too far behind; the
    /// stream is then over and further writes are ignored.
    func write(_ bytes: [UInt8]) -> Bool
    /// Queues a last message even past the buffer limit, then ends the response.
    func finish(with bytes: [UInt8])
    /// Whether the stream has ended (client gone, finished, or server stopping).
    var isClosed: Bool { get }
}

/// An HTTP response produced by the routing code and sent by the server adapter.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8] {
        didSet { shared = nil }
    }
    /// Where `body` came from when it is a shared one; the adapter may then send what it prepared for
    /// it before. Changing `body` drops it.
    public private(set) var shared: SharedBody?
    /// For a streamed body: called once with the sink, after the status and headers are queued;
    /// `body` then goes out first.
    public var stream: (@Sendable (any HTTPStreamSink) -> Void)?

    public init(
        status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        stream: (@Sendable (any HTTPStreamSink) -> Void)? = nil
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = stream
    }

    /// A response whose body is `shared`'s bytes.
    public init(status: Int, headers: [(name: String, value: String)], shared: SharedBody) {
        self.init(status: status, headers: headers, body: shared.bytes)
        self.shared = shared
    }

    public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body && (lhs.stream == nil) == (rhs.stream == nil)
            && lhs.headers.map { "\($0.name):\($0.value)" } == rhs.headers.map { "\($0.name):\($0.value)" }
    }

    /// The value of the first header with this name (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { HTTPHeaderName.equal($0.name, name) }?.value
    }
}

/// Header names are ASCII tokens, compared and lower-cased byte by byte: on every request, where
/// `lowercased()`'s Unicode case mapping and allocation showed in profiles.
public enum HTTPHeaderName {
    /// Whether two names are the same ignoring ASCII case.
    public static func equal(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // On the strings' own bytes (a header lookup runs this for every header of every request); a
        // string without contiguous UTF-8 (bridged) is compared through its view.
        let compared = a.utf8.withContiguousStorageIfAvailable { a in
            b.utf8.withContiguousStorageIfAvailable { b in
                for index in 0..<a.count where lower(a[index]) != lower(b[index]) { return false }
                return true
            }
        }
        return (compared ?? nil) ?? zip(a.utf8, b.utf8).allSatisfy { lower($0) == lower($1) }
    }

    /// The name in lower case (only A–Z change); a name already in lower case is returned as it is.
    public static func lowercased(_ name: String) -> String {
        let utf8 = name.utf8
        guard utf8.contains(where: isUpper) else { return name }
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            _ = buffer.initialize(fromContentsOf: utf8.lazy.map(lower))
            return utf8.count
        }
    }

    private static func isUpper(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }
    private static func lower(_ byte: UInt8) -> UInt8 { isUpper(byte) ? byte | 0x20 : byte }
}
