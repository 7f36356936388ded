/// An HTTP request as the routing code sees it: already parsed by the server library.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, percent-decoded by the server.
    public var path: String
    /// Query parameters in the order received.
    public var query: [(name: String, value: String)]
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: [UInt8]
    /// The client's address as text (`127.0.0.1`), for throttling and logs.
    public var clientAddress: String

    public init(
        method: String,
        path: String,
        query: [(name: String, value: String)] = [],
        headers: [String: String] = [:],
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

/// An HTTP response produced by the routing code and sent by the server adapter.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body
            && lhs.headers.map { "\($0.name):\($0.value)" } == rhs.headers.map { "\($0.name):\($0.value)" }
    }

    /// The value of the first header with this name (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}
