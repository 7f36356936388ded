/// Why an `HTTPServer` could not start, e.g. `cannot listen on 127.0.0.1:8080: Address already in use`.
public struct HTTPServerError: Error, CustomStringConvertible {
    /// A sentence for logs and the command line, naming the address and port involved.
    public var message: String

    /// Creates an error with the given message.
    public init(message: String) {
        self.message = message
    }

    public var description: String { message }

    /// `cannot listen on 127.0.0.1:8080: <reason>`, with IPv6 addresses in brackets (`[::1]:8080`).
    static func cannotListen(on address: String, port: Int, _ reason: String) -> HTTPServerError {
        let endpoint = address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
        return HTTPServerError(message: "cannot listen on \(endpoint): \(reason)")
    }
}
