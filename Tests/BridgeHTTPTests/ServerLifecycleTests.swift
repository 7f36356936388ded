import BridgeCore
import BridgeHTTP
import Dispatch
import Glibc
import Synchronization
import Testing

@Suite("Starting, stopping and binding")
struct ServerLifecycleTests {
    @Test func secondServerOnSamePortThrowsNamingAddressAndPort() throws {
        let (first, _) = try startRecordingServer()
        defer { first.stop() }
        let second = HTTPServer(configuration: HTTPServerConfiguration(port: first.port)) { _ in
            HTTPResponse(status: 500)
        }

        let error = #expect(throws: HTTPServerError.self) { try second.start() }

        #expect(error?.message == "cannot listen on 127.0.0.1:\(first.port): Address already in use")
        #expect(second.port == 0)
        #expect(ping(port: first.port)?.status == 200)
    }

    @Test func invalidBindAddressThrows() {
        let server = HTTPServer(configuration: HTTPServerConfiguration(bindAddress: "not-an-ip", port: 0)) { _ in
            HTTPResponse(status: 200)
        }

        let error = #expect(throws: HTTPServerError.self) { try server.start() }

        #expect(error?.message.hasPrefix("cannot listen on not-an-ip:0:") == true)
    }

    @Test func startingARunningServerThrows() throws {
        let (server, _) = try startRecordingServer()
        defer { server.stop() }

        #expect(throws: HTTPServerError.self) { try server.start() }
        #expect(ping(port: server.port)?.status == 200)
    }

    @Test func stopIsIdempotentAndANewServerOnPortZeroServes() throws {
        let (first, _) = try startRecordingServer()
        #expect(ping(port: first.port)?.status == 200)
        first.stop()
        first.stop()
        #expect(first.port == 0)

        let (second, _) = try startRecordingServer()
        defer { second.stop() }
        #expect(second.port > 0)
        #expect(ping(port: second.port)?.status == 200)
    }

    @Test func stoppedServerCanStartAgain() throws {
        let (server, recorder) = try startRecordingServer()
        defer { server.stop() }
        server.stop()

        try server.start()

        #expect(ping(port: server.port)?.status == 200)
        #expect(recorder.all.count == 1)
    }

    @Test func stopOnANeverStartedServerDoesNothing() {
        let server = HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { _ in HTTPResponse(status: 200) }
        server.stop()
        #expect(server.port == 0)
    }

    @Test func stopWaitsForTheHandlerInProgress() throws {
        let entered = DispatchSemaphore(value: 0)
        let finished = Flag()
        let server = HTTPServer(configuration: HTTPServerConfiguration(port: 0)) { _ in
            entered.signal()
            usleep(300_000)
            finished.raise()
            return HTTPResponse(status: 200)
        }
        try server.start()
        let port = server.port
        DispatchQueue.global().async { _ = ping(port: port) }
        entered.wait()

        server.stop()

        #expect(finished.isRaised)
    }

    @Test(.enabled(if: ipv6LoopbackAvailable()))
    func ipv6LoopbackServesAndReportsTheClientAddress() throws {
        let (server, recorder) = try startRecordingServer(HTTPServerConfiguration(bindAddress: "::1", port: 0))
        defer { server.stop() }

        let response = exchange(
            port: server.port, host: "::1", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

        #expect(response?.status == 200)
        #expect(recorder.all.map(\.clientAddress) == ["::1"])
    }

    @Test(.enabled(if: ipv6LoopbackAvailable()))
    func dualStackWildcardShowsIPv4ClientsAsPlainIPv4() throws {
        let (server, recorder) = try startRecordingServer(HTTPServerConfiguration(bindAddress: "::", port: 0))
        defer { server.stop() }

        #expect(ping(port: server.port)?.status == 200)
        #expect(recorder.all.map(\.clientAddress) == ["127.0.0.1"])
    }
}

/// A thread-safe boolean that only goes from false to true.
private final class Flag: Sendable {
    private let raised = Atomic<Bool>(false)

    var isRaised: Bool { raised.load(ordering: .acquiring) }

    func raise() {
        raised.store(true, ordering: .releasing)
    }
}

/// Whether this machine can bind the IPv6 loopback (some containers have IPv6 disabled).
private func ipv6LoopbackAvailable() -> Bool {
    let server = HTTPServer(configuration: HTTPServerConfiguration(bindAddress: "::1", port: 0)) { _ in
        HTTPResponse(status: 200)
    }
    defer { server.stop() }
    return (try? server.start()) != nil
}
