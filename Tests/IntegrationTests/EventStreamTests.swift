import BridgeRuntime
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `GET /api/v1/events` (Server-Sent Events) over a raw socket, as a browser's EventSource reads it.
@Suite(.timeLimit(.minutes(2)))
struct EventStreamTests {
    /// A client that sends the request and reads (or deliberately doesn't read) the stream.
    final class EventStreamClient: @unchecked Sendable {
        let fd: Int32
        private var received: [UInt8] = []

        /// - Parameter source: a loopback address to connect from (127.0.0.2 and so on), to play several clients.
        init(port: Int, token: String, receiveBuffer: Int? = nil, source: String? = nil) throws {
            guard let fd = LoopbackPort.connect(port: port, configure: { fd in
                if let source {
                    var local = sockaddr_in()
                    local.sin_family = sa_family_t(AF_INET)
                    local.sin_addr.s_addr = inet_addr(source)
                    _ = withUnsafePointer(to: &local) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                }
                if var size = receiveBuffer.map(Int32.init) {
                    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
                }
                var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            }) else { throw TestFailure("cannot connect") }
            self.fd = fd
            let request = "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                + "Authorization: Bearer \(token)\r\n\r\n"
            _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        }

        /// Reads whatever arrives within `seconds`; returns false once the server closed the stream.
        @discardableResult
        func read(for seconds: Double) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while Date() < deadline {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count == 0 { return false }
                if count > 0 { received += buffer[0..<count] }
            }
            return true
        }

        var text: String { String(decoding: received, as: UTF8.self) }

        /// Reads until `text` contains `needle` or `seconds` pass.
        func waitFor(_ needle: String, seconds: Double = 5) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if text.contains(needle) { return true }
                if !read(for: 0.1) { return text.contains(needle) }
            }
            return text.contains(needle)
        }

        deinit { close(fd) }
    }

    @Test func aLightChangeArrivesOnTheOwnersStreamOnly() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 30\n")
        let alice = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let bob = try await APITests.token(bridge.httpPort, "Mehmet", "123456")
        let aliceStream = try EventStreamClient(port: bridge.httpPort, token: alice)
        let bobStream = try EventStreamClient(port: bridge.httpPort, token: bob)
        #expect(aliceStream.waitFor("retry: 3000"))
        #expect(aliceStream.text.hasPrefix("HTTP/1.1 200"))
        #expect(aliceStream.text.contains("text/event-stream"))
        #expect(bobStream.waitFor("retry: 3000"))

        let client = try await TestSubscriber(broker: broker.port)
        let sent = Date()
        try client.publish("smarthome/1/kitchen/lights/set", "ON")
        #expect(aliceStream.waitFor(#""room":"kitchen","sensor":"lights","value":"ON""#))
        let latency = Date().timeIntervalSince(sent)
        #expect(aliceStream.text.contains("event: state\ndata: {\"type\":\"state\""))
        try client.publish("smarthome/1/kitchen/lights/set", "DIM")
        #expect(aliceStream.waitFor("event: command_rejected"))
        bobStream.read(for: 0.5)
        #expect(!bobStream.text.contains("kitchen"), "another user's changes never reach this stream")
        print("events: light change reached the SSE client \(Int(latency * 1000)) ms after the MQTT command")

        let unauthenticated = try EventStreamClient(port: bridge.httpPort, token: "forged")
        #expect(unauthenticated.waitFor("401"))
    }

    @Test func loggingOutEndsTheTokensStreams() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 30\n")
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let other = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let stream = try EventStreamClient(port: bridge.httpPort, token: token)
        let kept = try EventStreamClient(port: bridge.httpPort, token: other)
        #expect(stream.waitFor("retry: 3000"))
        #expect(kept.waitFor("retry: 3000"))
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/logout", method: "POST", token: token).status == 204)
        #expect(await eventually(timeout: 5) { !stream.read(for: 0.2) }, "the revoked token's stream stays open")
        #expect(kept.read(for: 0.5), "another session's stream is untouched")
    }

    @Test func aClientThatStopsReadingNeverStallsPublishing() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 0.01\n")
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let stalled = try EventStreamClient(port: bridge.httpPort, token: token, receiveBuffer: 4096)
        #expect(stalled.waitFor("retry: 3000"))  // connected; from here on it reads nothing

        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/+/temperature"])
        var perSecond: [Int] = []
        for _ in 0..<4 {
            let before = watcher.messages.count
            try await Task.sleep(for: .seconds(1))
            perSecond.append(watcher.messages.count - before)
        }
        // 8 rooms' temperatures change about every second step at 100 steps/s: hundreds a second.
        // The first second only warms up (on a loaded machine it can be slow for other reasons);
        // a stall caused by the client shows in every second after it.
        #expect(perSecond.dropFirst().allSatisfy { $0 > 50 }, "publishing stalled: \(perSecond) messages/s")
        // The stalled client was cut off with a last event saying why.
        let stillOpen = stalled.read(for: 2)
        #expect(stalled.text.contains("event: overflow"),
                "no overflow notice in \(stalled.text.utf8.count) bytes (open: \(stillOpen)); ends \(stalled.text.suffix(200))")
        #expect(try await HTTP.get(bridge.httpPort, "/healthz").status == 200)
        print("events: MQTT kept \(perSecond) msgs/s on user 1's temperatures while an SSE client hung")
    }

    /// README, Live events: "a heartbeat comment every 15 s", so a client (and a proxy) can tell a
    /// quiet stream from a dead one. Nothing else happens meanwhile: the source ticks once an hour.
    @Test func aQuietStreamGetsAHeartbeatCommentWithinFifteenSeconds() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 3600\n")
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let stream = try EventStreamClient(port: bridge.httpPort, token: token)
        #expect(stream.waitFor("retry: 3000"))
        #expect(stream.waitFor("\n: heartbeat\n\n", seconds: 16), "no heartbeat in 16 s: \(stream.text.suffix(200))")
        #expect(!stream.text.contains("event: "), "the stream was not quiet: \(stream.text.suffix(300))")
        #expect(stream.read(for: 0.2), "the stream is still open")
    }
}
