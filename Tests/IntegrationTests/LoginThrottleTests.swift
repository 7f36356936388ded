import BridgeRuntime
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Login throttling against the real bridge and its real argon2id checks, with clients on several loopback
/// addresses (README "Login throttling", docs/security.md).
@Suite(.timeLimit(.minutes(3)))
struct LoginThrottleIntegrationTests {
    /// `POST /api/v1/login` from `source`; the status and the whole answer.
    static func login(_ port: Int, from source: String, _ username: String, _ password: String,
                      forwardedFor: String? = nil) -> (status: Int, text: String) {
        guard let fd = RawClient.connect(from: source, port: port, receiveTimeout: 30) else { return (0, "") }
        defer { close(fd) }
        let body = #"{"username":"\#(username)","password":"\#(password)"}"#
        let forwarded = forwardedFor.map { "X-Forwarded-For: \($0)\r\n" } ?? ""
        RawClient.send(fd, Array(("POST /api/v1/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "\(forwarded)Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)").utf8))
        let text = String(decoding: RawClient.readAll(fd), as: UTF8.self)
        return (Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0, text)
    }

    /// The red team locked everyone behind one address out with 21 failures. Now the guesser's address is
    /// held back for unknown names, but a user with no failures of their own logs in from it at once.
    @Test func aGuesserBehindTheSameAddressNeverLocksOutACleanUsersCorrectLogin() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        for index in 0..<21 {
            #expect(Self.login(port, from: "127.0.0.2", "guess\(index)", "wrong").status == 401)
        }
        #expect(Self.login(port, from: "127.0.0.2", "guess99", "wrong").status == 429)
        let started = Date()
        let household = Self.login(port, from: "127.0.0.2", "Mehmet", "123456")
        let seconds = Date().timeIntervalSince(started)
        #expect(household.status == 200, "\(household.text.suffix(120))")
        #expect(household.text.contains(#""token":""#))
        print("login: after 21 failures from one address, a clean user's correct login answered \(household.status) "
            + "in \(Int(seconds * 1000)) ms")

        // The security log: every outcome, with user and address, never a password.
        #expect(await bridge.waitForLog("security: login user=Mehmet address=127.0.0.2 outcome=granted"))
        let security = bridge.log.split(separator: "\n").filter { $0.contains("security: ") }
        #expect(security.contains { $0.contains("user=guess0 address=127.0.0.2 outcome=denied") })
        #expect(security.contains { $0.contains("user=guess99 address=127.0.0.2 outcome=throttled") })
        #expect(!security.contains { $0.contains("123456") || $0.contains("wrong") })
        let token = try #require(household.text.split(separator: "\"").drop { $0 != "token" }.dropFirst(2).first)
        #expect(try await HTTP.send(port, "/api/v1/logout", method: "POST", token: String(token)).status == 204)
        #expect(await bridge.waitForLog("security: logout user=2 address=127.0.0.1 outcome=ok"))
    }

    /// 40 wrong passwords at once for one user, from 40 addresses: the checks are reserved atomically, so
    /// they get the same 4 checks as 40 in a row (the red team saw 7).
    @Test func fortyParallelTriesGetFourChecks() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort
        let statuses = await withTaskGroup(of: Int.self) { group in
            for index in 0..<40 {
                group.addTask { Self.login(port, from: "127.0.1.\(index + 1)", "Cemalettin", "wrong\(index)").status }
            }
            var all: [Int] = []
            for await status in group { all.append(status) }
            return all
        }
        let checked = statuses.filter { $0 == 401 }.count
        print("login: 40 parallel wrong passwords for one user: \(checked) checked (401), "
            + "\(statuses.filter { $0 == 429 }.count) throttled (429)")
        // 4, or one more if a 1 s block ran out while the last of the 40 were still arriving on a slow machine.
        #expect((4...5).contains(checked), "\(statuses)")
        #expect(statuses.allSatisfy { $0 == 401 || $0 == 429 })
    }

    /// Behind a trusted proxy, the address that counts is the one it forwards; without trust the header is ignored.
    @Test func forwardedForCountsOnlyFromTrustedProxies() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: """
            http:
              trusted_proxies: 127.0.0.1
            source:
              interval: 30

            """)
        let port = bridge.httpPort
        for index in 0..<21 {
            _ = Self.login(port, from: "127.0.0.1", "g\(index)", "x", forwardedFor: "203.0.113.7")
        }
        #expect(Self.login(port, from: "127.0.0.1", "g", "x", forwardedFor: "203.0.113.7").status == 429)
        #expect(Self.login(port, from: "127.0.0.1", "g", "x", forwardedFor: "203.0.113.8").status == 401)
        // An untrusted peer can't pick its address by sending the header.
        #expect(Self.login(port, from: "127.0.0.3", "g", "x", forwardedFor: "203.0.113.8").status == 401)
        #expect(await bridge.waitForLog("user=g address=203.0.113.7 outcome=throttled"))
        #expect(bridge.log.contains("user=g address=127.0.0.3 outcome=denied"))
    }
}
