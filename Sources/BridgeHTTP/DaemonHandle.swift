import CMicroHTTPD

/// One running libmicrohttpd daemon and the dispatcher its threads call into.
///
/// `@unchecked Sendable` because `OpaquePointer` is not Sendable. It is safe because Swift never dereferences
/// the pointer: it is only handed to `MHD_stop_daemon`, and `HTTPServer` keeps the handle inside a `Mutex`,
/// so `stop()` runs once, under the lock, and never concurrently with `init`.
final class DaemonHandle: @unchecked Sendable {
    private let daemon: OpaquePointer
    /// Retained for MHD's `cls` pointers; released only after `MHD_stop_daemon` has joined every MHD thread.
    private let dispatcher: Unmanaged<RequestDispatcher>
    /// Kept until the daemon stops: MHD holds pointers into it.
    private let credentials: TLSCredentials?
    let port: Int

    /// Binds the configured address and starts MHD's thread pool on it.
    init(configuration: HTTPServerConfiguration, dispatcher: RequestDispatcher) throws(HTTPServerError) {
        var credentials: TLSCredentials?
        if let tls = configuration.tls {
            guard CMicroHTTPD_supports_tls() != 0 else {
                throw .cannotListen(on: configuration.bindAddress, port: configuration.port,
                                    "this libmicrohttpd was built without TLS (GnuTLS)")
            }
            credentials = try TLSCredentials(tls)
        }
        let socket = try ListeningSocket.open(address: configuration.bindAddress, port: configuration.port)

        // Suspend/resume lets streamed responses (Server-Sent Events) wait for data without a thread.
        // No MHD_USE_ERROR_LOG: MHD would print a line to stderr for every client that sends oversized headers,
        // and the one failure that matters, not starting, is reported through HTTPServerError.
        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if socket.isDualStack {
            flags |= MHD_USE_DUAL_STACK.rawValue
        } else if socket.isIPv6 {
            flags |= MHD_USE_IPv6.rawValue
        }
        if credentials != nil {
            flags |= MHD_USE_TLS.rawValue
        }
        // MHD keeps the request line and headers in a per-connection pool that must also hold its bookkeeping
        // and the response headers; twice the header limit (never below MHD's 32 KiB default) is enough for
        // that, refuses absurd headers inside MHD, and RequestDispatcher enforces maxHeaderBytes exactly.
        let memoryLimit = max(2 * max(configuration.maxHeaderBytes, 0), 32 * 1024)
        let retained = Unmanaged.passRetained(dispatcher)
        // MHD's own limits are set above the configured ones so that MHD reports every connection and
        // ConnectionGuard applies the real limits (per /64, reserved slots, displacing a slow head), which MHD's
        // per-address count cannot. MHD splits its limit over the pool's threads, hence the headroom.
        let connectionCeiling = 2 * max(configuration.maxConnections, 1) + 4 * max(configuration.threadPoolSize, 1)
        let started = CMicroHTTPD_start_daemon(
            flags,
            socket.descriptor,
            mhdAccessHandler,
            retained.toOpaque(),
            mhdRequestCompleted,
            retained.toOpaque(),
            mhdConnectionNotified,
            retained.toOpaque(),
            mhdUnescape,
            retained.toOpaque(),
            Self.count(configuration.threadPoolSize, minimum: 1),
            Self.count(connectionCeiling, minimum: 1),
            0,
            Self.count(configuration.connectionTimeoutSeconds, minimum: 0),
            memoryLimit,
            credentials?.key,
            credentials?.certificate
        )
        guard let started else {
            retained.release()
            socket.closeAfterFailedStart()
            throw .cannotListen(on: configuration.bindAddress, port: socket.port, credentials == nil
                ? "libmicrohttpd could not start (out of threads or file descriptors?)"
                : "libmicrohttpd could not start TLS: the certificate or key was refused (not PEM, encrypted, "
                    + "or not a pair?)")
        }
        self.daemon = started
        self.dispatcher = retained
        self.credentials = credentials
        self.port = socket.port
        dispatcher.connections.startWatchdog()
    }

    /// Stops accepting, waits for handlers in progress, closes every connection and the listening socket.
    /// Must be called exactly once.
    func stop() {
        // MHD must not be stopped with suspended connections: end the streams first.
        dispatcher.takeUnretainedValue().connections.stopWatchdog()
        dispatcher.takeUnretainedValue().streams.stopAll()
        MHD_stop_daemon(daemon)
        dispatcher.release()
    }

    private static func count(_ value: Int, minimum: Int) -> UInt32 {
        UInt32(clamping: max(value, minimum))
    }
}
