import BridgeCore
import Foundation
import Testing

/// Alarms are capped per user and listed in pages (README "Alarms"), against the real bridge.
@Suite(.timeLimit(.minutes(2)))
struct AlarmLimitTests {
    static func create(_ port: Int, token: String, index: Int) async throws -> HTTP.Reply {
        // Few distinct times and titles, so the order falls back to the uuid often.
        let body = #"{"title":"Alarm \#(index % 3)","fireDate":"2030-01-01T07:0\#(index % 4):00Z","repeats":"daily"}"#
        return try await HTTP.send(port, "/api/v1/alarms", method: "POST", body: Data(body.utf8), token: token)
    }

    @Test func theCapRefusesOneMoreWith409AndOtherUsersAreUnaffected() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "alarms:\n  max_per_user: 5\n")
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        // Parallel requests can't pass the cap together: the count and the insert are one statement.
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<20 {
                group.addTask { try await Self.create(bridge.httpPort, token: token, index: index).status }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count { $0 == 201 } == 5 && statuses.count { $0 == 409 } == 15, "\(statuses.sorted())")
        let refused = try await Self.create(bridge.httpPort, token: token, index: 99)
        #expect(refused.status == 409)
        let message = (AlarmsAndHistoryTests.object(refused)["error"] as? [String: Any])?["message"] as? String
        #expect(message == "you have 5 alarms, the most alarms.max_per_user allows; delete one first", "\(refused.text)")
        let list = AlarmsAndHistoryTests.object(try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "GET",
                                                                    token: token))
        #expect((list["alarms"] as? [Any])?.count == 5)
        // Another user has a cap of their own.
        let other = try await APITests.token(bridge.httpPort, "Mehmet", "123456")
        #expect(try await Self.create(bridge.httpPort, token: other, index: 0).status == 201)
        // A deleted alarm makes room for a new one.
        let uuid = try #require(((list["alarms"] as? [[String: Any]])?.first?["uuid"]) as? String)
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/alarms/\(uuid)", method: "DELETE", token: token).status == 204)
        #expect(try await Self.create(bridge.httpPort, token: token, index: 100).status == 201)
    }

    @Test func pagesListEveryAlarmExactlyOnce() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "alarms:\n  max_per_user: 300\n")
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        var created: Set<String> = []
        for index in 0..<230 {
            let reply = try await Self.create(bridge.httpPort, token: token, index: index)
            #expect(reply.status == 201)
            if let uuid = AlarmsAndHistoryTests.object(reply)["uuid"] as? String { created.insert(uuid) }
        }
        #expect(created.count == 230)
        var listed: [String] = []
        var pages = 0
        var next: String? = "/api/v1/alarms?limit=50"
        while let path = next, pages < 10 {
            let page = AlarmsAndHistoryTests.object(try await HTTP.send(bridge.httpPort, path, method: "GET", token: token))
            let alarms = try #require(page["alarms"] as? [[String: Any]])
            #expect(alarms.count == (pages < 4 ? 50 : 30), "page \(pages)")
            listed += alarms.compactMap { $0["uuid"] as? String }
            next = page["next"] as? String
            pages += 1
        }
        #expect(pages == 5)
        #expect(listed.count == 230 && Set(listed) == created, "every alarm once: \(listed.count) listed")
        // Without a limit, a page of 100 and where the rest starts; q is kept in next.
        let first = AlarmsAndHistoryTests.object(try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "GET",
                                                                     token: token))
        #expect((first["alarms"] as? [Any])?.count == 100)
        #expect(first["next"] as? String == "/api/v1/alarms?limit=100&offset=100")
        let filtered = AlarmsAndHistoryTests.object(try await HTTP.send(
            bridge.httpPort, "/api/v1/alarms?q=alarm%201&limit=10", method: "GET", token: token))
        #expect(filtered["next"] as? String == "/api/v1/alarms?limit=10&offset=10&q=alarm%201", "\(filtered["next"] ?? "")")
        for bad in ["limit=0", "limit=501", "limit=x", "offset=-1"] {
            let reply = try await HTTP.send(bridge.httpPort, "/api/v1/alarms?\(bad)", method: "GET", token: token)
            #expect(reply.status == 400, "\(bad): \(reply.status)")
            #expect(reply.text.contains(bad.hasPrefix("limit") ? "\\\"limit\\\"" : "\\\"offset\\\""), "\(reply.text)")
        }
    }

    /// The red team's case scaled to a test: one user with 2,000 alarms (cap raised). The one due
    /// in a few seconds still fires; the scheduler holds only what is due within 10 minutes.
    @Test func twoThousandAlarmsOfOneUserStillFireTheDueOneAndAreNotAllHeld() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "alarms:\n  max_per_user: 3000\n"
            + "source:\n  interval: 0.2\n  seed: 7\n")
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/1/bedroom/lights"])
        let now = Date()
        // Daily, from an hour ahead, one every 20 s: none within the next 10 minutes.
        for index in 0..<2_000 {
            let fireDate = Timestamp.iso8601(now.addingTimeInterval(3600 + Double(index) * 20))
            let body = #"{"title":"Alarm \#(index)","fireDate":"\#(fireDate)","repeats":"daily"}"#
            let reply = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST", body: Data(body.utf8),
                                            token: token)
            #expect(reply.status == 201)
        }
        let due = Timestamp.iso8601(Date().addingTimeInterval(8))
        let body = #"{"title":"Lights","fireDate":"\#(due)","action":{"room":"bedroom","lights":"ON"}}"#
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST", body: Data(body.utf8),
                                    token: token).status == 201)
        // The scheduler picks the new alarm up within a second or two; nothing else is held.
        var held = -1
        for _ in 0..<40 where held != 1 {
            held = try await Self.alarmsInMemory(bridge.httpPort)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(held == 1, "\(held) alarms held, only the one due soon should be")
        try await watcher.waitFor("smarthome/1/bedroom/lights", payload: "ON", timeout: 15)
        #expect(bridge.log.contains("alarm fired"), "\(bridge.log.suffix(2000))")
        // A one-shot alarm that fired is disabled: nothing due soon is held now.
        let cpuBefore = Fault.cpuSeconds(pid: bridge.pid) ?? 0
        try await Task.sleep(for: .seconds(5))
        let cpu = ((Fault.cpuSeconds(pid: bridge.pid) ?? 0) - cpuBefore) / 5
        #expect(try await Self.alarmsInMemory(bridge.httpPort) == 0)
        print("alarms: 2,001 for one user -> \(held) held before firing, 0 after; bridge CPU \(Int(cpu * 100)) % "
            + "of a core (simulation included), RSS \((Fault.residentBytes(pid: bridge.pid) ?? 0) / 1_048_576) MiB")
    }

    static func alarmsInMemory(_ port: Int) async throws -> Int {
        let metrics = try await HTTP.get(port, "/metrics").text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("smarthome_alarms_in_memory ") }
        return line.flatMap { Int($0.split(separator: " ")[1]) } ?? -1
    }
}
