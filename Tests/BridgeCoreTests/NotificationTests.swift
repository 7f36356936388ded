import Foundation
import Testing
@testable import BridgeCore

/// Notification targets from the config, the messages made of events, and the retry rule (README "Notifications").
@Suite struct NotificationRulesTests {
    typealias Pairs = KeyValuePairs<String, Any>

    func load(notify: [Any]) -> Result<BridgeConfiguration, ConfigIssues> {
        let user: Pairs = ["id": "1", "username": "Cemalettin", "password_hash": "$argon2id$v=19$x",
                           "rooms": ["Kitchen"], "notify": notify]
        return ConfigLoader.load(Fixtures.node(["users": [user]] as Pairs), environment: [:])
    }

    @Test func targetsAreDecodedAndNeverShowTheirSecrets() throws {
        let config = try load(notify: [
            ["webhook": ["url": "http://127.0.0.1:9000/hook?key=s3cret", "headers": ["X-Api-Key": "hidden"] as Pairs] as Pairs]
                as Pairs,
            ["ntfy": ["url": "https://ntfy.example:8443", "topic": "hallway", "token": "tk_hidden"] as Pairs] as Pairs,
        ]).get()
        let targets = config.users[0].notify
        #expect(targets == [.webhook(url: "http://127.0.0.1:9000/hook?key=s3cret", headers: ["X-Api-Key": "hidden"]),
                            .ntfy(url: "https://ntfy.example:8443", topic: "hallway", token: "tk_hidden")])
        #expect(targets.map(\.description) == ["webhook 127.0.0.1:9000", "ntfy ntfy.example:8443"])
    }

    @Test func badTargetsNameTheirKey() {
        let cases: [([Any], String)] = [
        ([["email": ["to": "x"] as Pairs] as Pairs] as [Any], "users[0].notify[0].email"),
        ([["webhook": ["url": "ftp://host/x"] as Pairs] as Pairs], "users[0].notify[0].webhook.url"),
        ([["webhook": [:] as Pairs] as Pairs], "users[0].notify[0].webhook.url"),
        ([["webhook": ["url": "http://h", "headers": ["Bad Name": "v"] as Pairs] as Pairs] as Pairs],
         "users[0].notify[0].webhook.headers.Bad Name"),
        ([["ntfy": ["url": "http://h"] as Pairs] as Pairs], "users[0].notify[0].ntfy.topic"),
        ([["ntfy": ["url": "http://h", "topic": "a/b"] as Pairs] as Pairs], "users[0].notify[0].ntfy.topic"),
        ([["webhook": ["url": "http://h"] as Pairs, "ntfy": ["url": "http://h", "topic": "t"] as Pairs] as Pairs],
         "users[0].notify[0]"),
        (["http://h"], "users[0].notify[0]"),
        ]
        for (notify, path) in cases {
            guard case .failure(let problems) = load(notify: notify) else {
                Issue.record("accepted \(notify)")
                continue
            }
            #expect(problems.issues.contains { $0.path == path }, "\(problems.issues.map { "\($0.path): \($0.message)" })")
            #expect(!problems.issues.contains { $0.message.contains("http://h") }, "a URL repeated in a message")
        }
    }

    @Test func eventsBecomeMessagesAndTheOthersNotifyNobody() {
        let at = Date(timeIntervalSince1970: 0)
        let watchdog = Watchdog(uuid: "w", userID: "1", title: "Bedroom too warm", room: "bedroom", sensor: .temperature,
                                condition: .above, value: 28, duration: 1800, quiet: nil)
        let fired = UserNotification.about(.watchdog(watchdog, recovered: false, at: at))
        #expect(fired?.title == "Bedroom too warm" && fired?.message == "bedroom temperature: above 28.0 for 30m.")
        #expect(fired?.priority == 4)
        #expect(UserNotification.about(.watchdog(watchdog, recovered: true, at: at))?.title == "Bedroom too warm: recovered")
        #expect(UserNotification.about(.gas(room: "kitchen", detected: true, at: at))?.priority == 5)
        #expect(UserNotification.about(.gas(room: "kitchen", detected: false, at: at)) == nil)
        #expect(UserNotification.about(.alarm(uuid: "a", title: "Wake up", firedAt: at))?.title == "Wake up")
        #expect(UserNotification.about(.relayed(type: "alarm", json: "{}")) == nil)
        let body = UserNotification.about(.alarm(uuid: "a", title: "Wake up", firedAt: at))!.ntfyBody(topic: "t").serialized
        #expect(body == #"{"topic":"t","title":"Wake up","message":"Alarm \"Wake up\" fired.","priority":3,"tags":["alarm_clock"]}"#)
    }

    @Test func retriesBackOffDoublingToTheirCapAndEnd() {
        let retry = DeliveryRetry(attempts: 5, initial: 2, maximum: 5)
        #expect((1...5).map { retry.delay(afterFailedAttempt: $0) } == [2, 4, 5, 5, nil])
        #expect(DeliveryRetry(attempts: 1, initial: 1, maximum: 1).delay(afterFailedAttempt: 1) == nil)
    }
}
