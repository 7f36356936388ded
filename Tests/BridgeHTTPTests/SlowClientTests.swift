import BridgeCore
@testable import BridgeHTTP
import Foundation
import Testing

/// Slowloris over real sockets: clients that open connections and send their request heads a byte at a time.
/// Every attacker is on loopback (127.0.0.2 to 127.0.0.6) and every loop is bounded.
@Suite("Slow clients cannot stop the server serving others")
struct SlowClientTests {
    /// The red team's attack on the default limits: 260 half-sent heads from 5 addresses, 52 each (under the
    /// per-address limit of 64), more than the 256 connections the server takes. A client from a sixth address
    /// must still be served, every time.
    @Test func normalClientIsServedWhile260HalfSentHeadsFrom5AddressesAreOpen() throws {
        let (server, _) = try startRecordingServer(HTTPServerConfiguration(port: 0))
        defer { server.stop() }

        var attackers: [RawHTTPConnection] = []
        for index in 0..<260 {
            let source = "127.0.0.\(2 + index % 5)"
            guard let connection = RawHTTPConnection(port: server.port, source: source) else { continue }
            connection.send("GET /slow HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            attackers.append(connection)
        }
        #expect(attackers.count == 260)

        var served = 0
        var milliseconds: [Double] = []
        for _ in 0..<8 {
            // Every attacker sends one more byte between probes, as a slowloris client does.
            for attacker in attackers { attacker.send("a") }
            let start = Date()
            if ping(port: server.port)?.status == 200 { served += 1 }
            milliseconds.append(Date().timeIntervalSince(start) * 1000)
        }
        #expect(served == 8)
        // Some attackers were refused: the last slots stay for other clients.
        #expect(server.connectionCount < 256)
        let median = milliseconds.sorted()[milliseconds.count / 2]
        print("slowloris: \(served)/8 probes served, median \(String(format: "%.1f", median)) ms")
    }

    /// The deadline is for the whole head: a byte every 200 ms does not keep the connection past it.
    @Test func headSentAByteAtATimeIsCutOffAtTheDeadline() throws {
        let (server, recorder) = try startRecordingServer(
            HTTPServerConfiguration(port: 0, connectionTimeoutSeconds: 30, requestHeadTimeoutSeconds: 1))
        defer { server.stop() }
        let slow = try #require(RawHTTPConnection(port: server.port))
        slow.send("GET /slow HTTP/1.1\r\nX-Slow: ")

        var closed = false
        for _ in 0..<25 where !closed {  // at most about 5 s
            slow.send("a")
            closed = slow.isClosedByServer(within: 0) || !slow.send("a")
            usleep(200_000)
        }

        #expect(closed)
        #expect(recorder.all.isEmpty)
        #expect(ping(port: server.port)?.status == 200)
    }

    /// A kept-alive connection gets a new deadline for its next head, counted from the end of the last request.
    @Test func keptAliveConnectionServesSeveralRequestsThenIdlesOut() throws {
        let (server, recorder) = try startRecordingServer(
            HTTPServerConfiguration(port: 0, requestHeadTimeoutSeconds: 1))
        defer { server.stop() }
        let client = try #require(RawHTTPConnection(port: server.port))

        for _ in 0..<3 {
            client.send("GET /again HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(client.readUntilHeadEnd(skipping: 2)?.hasPrefix("HTTP/1.1 200") == true)  // body "ok"
            usleep(500_000)  // half the deadline: each request starts a fresh one
        }
        #expect(recorder.all.count == 3)
        #expect(client.isClosedByServer(within: 5))
    }

    @Test func connectionsOverThePerAddressLimitAreRefusedAndOthersServed() throws {
        let (server, _) = try startRecordingServer(HTTPServerConfiguration(port: 0, maxConnectionsPerAddress: 3))
        defer { server.stop() }
        let held = (0..<3).compactMap { _ in RawHTTPConnection(port: server.port, source: "127.0.0.2") }
        for connection in held { connection.send("GET / HTTP/1.1\r\n") }
        let fourth = try #require(RawHTTPConnection(port: server.port, source: "127.0.0.2"))
        #expect(held.count == 3)

        // MHD's pool threads accept on their own, so the connection it sees last (the one refused)
        // need not be the one made last: exactly one of the four is closed, the others are kept.
        let all = held + [fourth]
        var refused: [Int] = []
        for _ in 0..<50 where refused.isEmpty {
            usleep(100_000)
            refused = all.indices.filter { all[$0].isClosedByServer(within: 0) }
        }
        #expect(refused.count == 1, "refused: \(refused)")
        #expect(ping(port: server.port)?.status == 200)
    }
}

extension RawHTTPConnection {
    /// Reads until the end of a response head (for kept-alive connections, which the server does not close),
    /// then `skipping` bytes of body.
    func readUntilHeadEnd(skipping bodyBytes: Int = 2) -> String? {
        var received: [UInt8] = []
        for _ in 0..<1000 {
            guard let byte = readByte() else { return nil }
            received.append(byte)
            if received.suffix(4) == Array("\r\n\r\n".utf8) {
                let head = String(decoding: received, as: UTF8.self)
                for _ in 0..<bodyBytes { _ = readByte() }
                return head
            }
        }
        return nil
    }
}
