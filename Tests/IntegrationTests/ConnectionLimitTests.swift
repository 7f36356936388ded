import BridgeRuntime
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `http.max_connections` (README, HTTP and Configuration): connections past the limit, from any
/// address, are not served; a freed slot serves again.
@Suite(.timeLimit(.minutes(2)))
struct ConnectionLimitTests {
    /// A request on a fresh connection from `source`; the answer, empty when there was none.
    static func get(from source: String, port: Int) -> String {
        guard let fd = RawClient.connect(from: source, port: port, receiveTimeout: 3) else { return "" }
        defer { close(fd) }
        RawClient.send(fd, Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        return String(decoding: RawClient.readAll(fd), as: UTF8.self)
    }

    @Test func connectionsPastMaxConnectionsAreNotServedUntilOneCloses() async throws {
        let broker = try await FaultBroker()
        let limit = 4
        let bridge = try await BridgeProcess(
            broker: nil, settings: Fault.settings(http: "  max_connections: \(limit)\n"),
            environment: ["SMARTHOME_MQTT_URL": broker.url])
        #expect(Self.get(from: "127.0.0.1", port: bridge.httpPort).hasPrefix("HTTP/1.1 200"))
        // The server counts that connection until its close notification, which can come just after
        // the client has read the answer: give it a moment, or the fourth held connection is refused.
        try await Task.sleep(for: .milliseconds(300))

        // The limit taken up by idle half-requests from four addresses (per address the limit is 64).
        let held = (0..<limit).compactMap { index -> Int32? in
            guard let fd = RawClient.connect(from: "127.0.0.\(20 + index)", port: bridge.httpPort) else { return nil }
            RawClient.send(fd, Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8))
            return fd
        }
        #expect(held.count == limit)
        try await Task.sleep(for: .milliseconds(300))
        let refused = Self.get(from: "127.0.0.30", port: bridge.httpPort)
        #expect(!refused.hasPrefix("HTTP/1.1"), "a connection past the limit got \(refused.prefix(40))")

        close(held[0])
        var served = ""
        for _ in 0..<20 where !served.hasPrefix("HTTP/1.1 200") {
            try await Task.sleep(for: .milliseconds(100))
            served = Self.get(from: "127.0.0.30", port: bridge.httpPort)
        }
        #expect(served.hasPrefix("HTTP/1.1 200"), "after one closed: \(served.prefix(40))")
        for fd in held.dropFirst() { close(fd) }
    }
}
