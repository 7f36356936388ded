/// How an `HTTPServer` listens and which limits it enforces.
public struct HTTPServerConfiguration: Sendable {
    /// PEM files for HTTPS: a certificate (chain) and its private key.
    public struct TLS: Sendable, Equatable {
        public var certificateFile: String
        public var keyFile: String

        public init(certificateFile: String, keyFile: String) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    /// Numeric address to listen on: `127.0.0.1`, `0.0.0.0`, `::1` or `::`.
    /// `::` accepts IPv6 and IPv4 (dual stack); any other IPv6 address accepts IPv6 only.
    public var bindAddress: String
    /// TCP port; 0 lets the operating system choose one, which `HTTPServer.port` then reports.
    public var port: Int
    /// Maximum number of simultaneous connections, all clients together.
    public var maxConnections: Int
    /// Maximum number of simultaneous connections from one client: an IPv4 address or an IPv6 /64.
    public var maxConnectionsPerAddress: Int
    /// Seconds a connection may stay idle before the server closes it.
    public var connectionTimeoutSeconds: Int
    /// Seconds a client has to send a whole request head (request line and headers), counted from the
    /// connection's start or, on a kept-alive connection, from the end of the previous request; then the
    /// connection is closed. A deadline for the whole head, so sending a byte now and then does not extend it.
    public var requestHeadTimeoutSeconds: Double
    /// Maximum size of the request line plus headers, line endings and the blank line included; a larger
    /// request is refused (431, or 414 for a long URI, or the connection is closed) without calling the handler.
    public var maxHeaderBytes: Int
    /// Maximum request body size; a larger body is answered with 413 without calling the handler.
    public var maxBodyBytes: Int
    /// Number of libmicrohttpd threads that accept connections and run the handler.
    public var threadPoolSize: Int
    /// Unsent bytes a streamed response may hold for a slow client before writes to it fail.
    public var maxStreamBufferBytes: Int
    /// With TLS set, every request is served over HTTPS (libmicrohttpd's GnuTLS) and plain HTTP is refused.
    public var tls: TLS?

    /// Creates a configuration; every parameter has a default suited to a LAN-facing bridge.
    public init(
        bindAddress: String = "127.0.0.1",
        port: Int = 8080,
        maxConnections: Int = 256,
        maxConnectionsPerAddress: Int = 64,
        connectionTimeoutSeconds: Int = 30,
        requestHeadTimeoutSeconds: Double = 10,
        maxHeaderBytes: Int = 16 * 1024,
        maxBodyBytes: Int = 64 * 1024,
        threadPoolSize: Int = 4,
        maxStreamBufferBytes: Int = 256 * 1024,
        tls: TLS? = nil
    ) {
        self.bindAddress = bindAddress
        self.port = port
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.requestHeadTimeoutSeconds = requestHeadTimeoutSeconds
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.threadPoolSize = threadPoolSize
        self.maxStreamBufferBytes = maxStreamBufferBytes
        self.tls = tls
    }
}
