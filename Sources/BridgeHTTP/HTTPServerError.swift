/// Why an `HTTPServer` could not start, e.g. `cannot listen on 127.0.0.1:8080: Address already in use`.
public struct HTTPServerError: Error, CustomStringConvertible {
    /// A sentence for logs and the command line, naming the address and port involved.
    public var message: String

    /// Creates an error with the given message.
    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}
