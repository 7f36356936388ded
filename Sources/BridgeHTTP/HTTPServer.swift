import BridgeCore
import Synchronization

/// An HTTP/1.1 server backed by libmicrohttpd's thread pool.
///
/// The handler runs synchronously on one of libmicrohttpd's threads, once per complete request, so it may run
/// concurrently with itself up to `threadPoolSize` times. It must not call `start()` or `stop()` on its own
/// server: `stop()` waits for handlers in progress.
public final class HTTPServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: HTTPServerConfiguration
    private let dispatcher: RequestDispatcher
    /// The running daemon, nil while stopped; held for the whole of start and stop so they never interleave.
    private let daemon = Mutex<DaemonHandle?>(nil)
    /// Kept apart from `daemon` so that reading `port` (from a handler, say) never waits on a `stop()` in
    /// progress, which itself waits for that handler.
    private let boundPort = Atomic<Int>(0)

    /// Creates a stopped server; nothing is bound until `start()`.
    public init(configuration: HTTPServerConfiguration, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.configuration = configuration
        self.dispatcher = RequestDispatcher(configuration: configuration, handler: handler)
    }

    deinit {
        stop()
    }

    /// Binds the configured address and starts serving.
    /// - Throws: `HTTPServerError` naming the address and port when binding or starting fails, or when the
    ///   server is already running.
    public func start() throws(HTTPServerError) {
        try daemon.withLock { (running: inout DaemonHandle?) throws(HTTPServerError) in
            if let running {
                throw .cannotListen(on: configuration.bindAddress, port: running.port, "this server is already running")
            }
            let started = try DaemonHandle(configuration: configuration, dispatcher: dispatcher)
            running = started
            boundPort.store(started.port, ordering: .releasing)
        }
    }

    /// The port the server is bound to while running (the real one when configured with 0), otherwise 0.
    public var port: Int {
        boundPort.load(ordering: .acquiring)
    }

    /// Connections the server's connection rules count now (for tests and logs).
    var connectionCount: Int { dispatcher.connections.count }

    /// Stops serving and returns once handlers in progress have finished. Calling it again, or on a server
    /// that never started, does nothing; the server can be started again afterwards.
    public func stop() {
        daemon.withLock { running in
            guard let stopping = running else { return }
            boundPort.store(0, ordering: .releasing)
            stopping.stop()
            running = nil
        }
    }
}
