import BridgeCore
import BridgeHTTP
import BridgeRuntime
import Foundation
import Synchronization
import Testing

/// Notifications from the real bridge to receivers the test runs on 127.0.0.1 (README "Notifications").
@Suite(.serialized, .timeLimit(.minutes(3)))
struct NotificationTests {
    /// A webhook or ntfy endpoint: answers each request with the next status of a script (then 200),
    /// optionally after hanging, and records what it got.
    final class Receiver: Sendable {
        struct Got: Sendable {
            var path: String
            var headers: HTTPHeaders
            var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]) ?? [:] }
            var body: [UInt8]
            func header(_ name: String) -> String? {
                headers[name.lowercased()]
            }
        }

        final class Shared: Sendable {
            let got = Mutex<[Got]>([])
            let statuses = Mutex<[Int]>([])
            let hang = Mutex<Double>(0)
        }

        let port: Int
        private let server: HTTPServer
        private let shared = Shared()

        init(statuses: [Int] = [], hang: Double = 0) throws {
            let shared = shared
            shared.statuses.withLock { $0 = statuses }
            shared.hang.withLock { $0 = hang }
            server = HTTPServer(configuration: HTTPServerConfiguration(port: 0, threadPoolSize: 16)) { request in
                shared.got.withLock { $0.append(Got(path: request.path, headers: request.headers, body: request.body)) }
                let wait = shared.hang.withLock { $0 }
                if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                let status = shared.statuses.withLock { $0.isEmpty ? 200 : $0.removeFirst() }
                return HTTPResponse(status: status, body: Array("{}".utf8))
            }
            try server.start()
            port = server.port
        }

        var got: [Got] { shared.got.withLock { $0 } }
        var url: String { "http://127.0.0.1:\(port)" }
        func stop() { server.stop() }
    }

    static let hash = "$argon2id$v=19$m=65536,t=2,p=1$AFwYLl14V6VLFBq3mN1oNA$z0YImiO0MUlUwjAJcNkvPZsytpsLsNbqpDuYtqrpMOU"

    /// A third user (`Notified`, password 12345; rooms without gas, so only the test's alarms notify) with the given notify list.
    static func user(notify: String) -> String {
        """
          - id: "3"
            username: Notified
            password_hash: "\(hash)"
            rooms: [Bedroom, Garden]
            notify:
        \(notify)
        """
    }

    static func settings(_ extra: String = "") -> String {
        "source:\n  interval: 0.2\n  seed: 7\nnotify:\n  backoff: 200ms\n  max_backoff: 1s\n  timeout: 1s\n  attempts: 3\n" + extra
    }

    static func metric(_ port: Int, _ name: String) async throws -> Int? {
        let text = try await HTTP.get(port, "/metrics").text
        return text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ")[1]) }
    }

    static func fireAlarm(_ port: Int, _ title: String, in seconds: Double = 1.5) async throws {
        let token = try await APITests.token(port, "Notified", "12345")
        let body = AlarmsAndHistoryTests.alarmBody(title, at: Date(timeIntervalSinceNow: seconds))
        let reply = try await HTTP.send(port, "/api/v1/alarms", method: "POST", body: body, token: token)
        #expect(reply.status == 201, "\(reply.text)")
    }

    @Test func aWebhookAndAnNtfyServerGetTheAlarmAndNoSecretIsLogged() async throws {
        let webhook = try Receiver()
        let ntfy = try Receiver()
        let broker = try await TestBroker()
        let notify = """
                  - webhook: { url: "\(webhook.url)/hook", headers: { X-Api-Key: "webhook-secret-3141" } }
                  - ntfy: { url: "\(ntfy.url)", topic: grandma-hallway, token: "tk_ntfysecret2718" }
            """
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings("log:\n  level: debug\n"),
                                             extraUsers: Self.user(notify: notify))
        try await Self.fireAlarm(bridge.httpPort, "Wake up")
        #expect(await eventually(timeout: 10) { webhook.got.count == 1 && ntfy.got.count == 1 })
        let hook = try #require(webhook.got.first)
        #expect(hook.path == "/hook")
        #expect(hook.header("X-Api-Key") == "webhook-secret-3141")
        #expect(hook.header("Content-Type")?.hasPrefix("application/json") == true)
        #expect(hook.json["user"] as? String == "3")
        #expect((hook.json["event"] as? [String: Any])?["type"] as? String == "alarm")
        #expect((hook.json["event"] as? [String: Any])?["title"] as? String == "Wake up")
        // ntfy's JSON publishing (docs.ntfy.sh, "Publish as JSON"): to the server's root, topic in the body.
        let published = try #require(ntfy.got.first)
        #expect(published.path == "/")
        #expect(published.header("Authorization") == "Bearer tk_ntfysecret2718")
        #expect(published.json["topic"] as? String == "grandma-hallway")
        #expect(published.json["title"] as? String == "Wake up")
        #expect(published.json["priority"] as? Int == 3)
        #expect((published.json["tags"] as? [String])?.isEmpty == false)
        #expect(try await Self.metric(bridge.httpPort, "smarthome_notifications_sent_total") == 2)
        try await Task.sleep(for: .seconds(1))
        #expect(webhook.got.count == 1 && ntfy.got.count == 1, "delivered more than once")
        #expect(!bridge.log.contains("webhook-secret-3141") && !bridge.log.contains("tk_ntfysecret2718"))
    }

    /// No ntfy server is packaged for Debian 12 or on PyPI; Debian's `apprise` (a real ntfy client)
    /// shows that the test's ntfy endpoint is shaped as ntfy's publishers expect: both it and the
    /// bridge publish JSON with `topic`, `title` and `message` to the server's root.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/apprise")))
    func theBridgePublishesToNtfyAsARealNtfyClientDoes() async throws {
        let ntfy = try Receiver()
        let apprise = try ChildProcess.spawn("/usr/bin/apprise", ["-t", "Wake up", "-b", "Alarm fired",
                                                                  "ntfy://127.0.0.1:\(ntfy.port)/grandma-hallway"])
        #expect(apprise.waitForExit(timeout: 30) == 0)
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(), extraUsers: Self.user(notify: """
                  - ntfy: { url: "\(ntfy.url)", topic: grandma-hallway }
            """))
        try await Self.fireAlarm(bridge.httpPort, "Wake up")
        #expect(await eventually(timeout: 10) { ntfy.got.count == 2 })
        let (client, ours) = (try #require(ntfy.got.first), try #require(ntfy.got.last))
        #expect(client.header("User-Agent") == "Apprise")
        #expect(client.path == ours.path)
        #expect(client.header("Content-Type")?.hasPrefix("application/json") == true)
        #expect(ours.header("Content-Type")?.hasPrefix("application/json") == true)
        for (got, message) in [(client, "Alarm fired"), (ours, "Alarm \"Wake up\" fired.")] {
            #expect(got.json["topic"] as? String == "grandma-hallway")
            #expect(got.json["title"] as? String == "Wake up")
            #expect(got.json["message"] as? String == message)
        }
    }

    @Test func aReceiverThatFailsOnceGetsItOnceAfterARetryAndOneThatAlwaysFailsIsCounted() async throws {
        let flaky = try Receiver(statuses: [500])
        let broken = try Receiver(statuses: [500, 500, 500, 500])
        let broker = try await TestBroker()
        let notify = """
                  - webhook: { url: "\(flaky.url)/flaky" }
                  - webhook: { url: "\(broken.url)/broken" }
            """
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(),
                                             extraUsers: Self.user(notify: notify))
        try await Self.fireAlarm(bridge.httpPort, "Retry me")
        #expect(await eventually(timeout: 10) { flaky.got.count == 2 && broken.got.count == 3 })
        try await Task.sleep(for: .seconds(2))
        // 500 then 200: two requests, one notification; always 500: notify.attempts (3) tries, then given up.
        #expect(flaky.got.count == 2)
        #expect(broken.got.count == 3)
        #expect(flaky.got.allSatisfy { ($0.json["event"] as? [String: Any])?["title"] as? String == "Retry me" })
        #expect(try await Self.metric(bridge.httpPort, "smarthome_notifications_sent_total") == 1)
        #expect(try await Self.metric(bridge.httpPort, "smarthome_notifications_failed_total") == 1)
        #expect(try await Self.metric(bridge.httpPort, "smarthome_notifications_retries_total") == 3)
        #expect(bridge.log.contains("notification failed; giving up"))
    }

    @Test func aReceiverThatHangsNeverDelaysReadings() async throws {
        let hanging = try Receiver(hang: 3)
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/+/+/+", "smarthome/3/events"])
        let notify = """
                  - webhook: { url: "\(hanging.url)/hang" }
            """
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(),
                                             extraUsers: Self.user(notify: notify))
        for index in 0..<4 { try await Self.fireAlarm(bridge.httpPort, "Hang \(index)", in: 1 + Double(index)) }
        // Sample the readings every 20 ms while the webhook hangs (4 alarms × 3 tries of 1 s each).
        func readings() -> Int {
            watcher.messages.count { message in
                ["temperature", "humidity", "movement", "gas"].contains { message.topic.hasSuffix("/" + $0) }
            }
        }
        var last = (count: readings(), time: Date())
        var longest = 0.0
        let start = Date()
        while hanging.got.count < 12, Date().timeIntervalSince(start) < 20 {
            try await Task.sleep(for: .milliseconds(20))
            let now = (count: readings(), time: Date())
            if now.count > last.count {
                longest = max(longest, now.time.timeIntervalSince(last.time))
                last = now
            }
        }
        let elapsed = Date().timeIntervalSince(start)
        longest = max(longest, Date().timeIntervalSince(last.time))
        print("notifications: hanging webhook (notify.timeout 1 s, 3 tries, 4 alarms, source.interval 0.2 s): "
            + "\(hanging.got.count) requests in \(String(format: "%.1f", elapsed)) s, longest gap between readings "
            + "\(String(format: "%.0f", longest * 1000)) ms (20 ms sampling)")
        #expect(hanging.got.count == 12, "each of 4 notifications tried notify.attempts (3) times")
        // Every alarm's event still went out, and readings kept coming.
        let events = watcher.messages.filter { $0.topic == "smarthome/3/events" && $0.text.contains(#""type":"alarm""#) }
        #expect(events.count == 4)
        // The last tries time out a second after they reach the receiver.
        var failed: Int?
        for _ in 0..<50 where failed != 4 {
            failed = try await Self.metric(bridge.httpPort, "smarthome_notifications_failed_total")
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(failed == 4)
        #expect(bridge.log.contains("timed out"))
    }
}
