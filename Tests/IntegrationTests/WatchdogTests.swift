import Foundation
import Testing

/// Watchdogs through the real bridge polling a REST upstream the test stops and starts again, the
/// broker and the database (README "Watchdogs").
@Suite(.serialized, .timeLimit(.minutes(3)))
struct WatchdogTests {
    static func body(_ json: String) -> Data { Data(json.utf8) }

    static let silentKitchen = #"{"title":"Kitchen sensor","room":"kitchen","sensor":"temperature","condition":"silent","for":"2s"}"#

    func events(_ watcher: TestSubscriber, _ state: String) -> [String] {
        watcher.messages.filter { $0.topic == "smarthome/1/events" && $0.text.contains(#""type":"watchdog""#)
            && $0.text.contains(#""state":"\#(state)""#) }.map(\.text)
    }

    @Test func aSilentSensorFiresOnceRecoversFiresAgainAndQuietHoursHoldIt() async throws {
        var upstream = try RestSourceTests.Upstream()
        let upstreamPort = upstream.port
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/events"])
        let storage = try TestFiles.makeDirectory("watchdogs").appendingPathComponent("bridge.sqlite").path
        let environment = ["SMARTHOME_SCHEDULER_TIMEZONE": "UTC", "SMARTHOME_WATCHDOGS_MAX_PER_USER": "2"]
        var bridge = try await BridgeProcess(broker: broker, settings: RestSourceTests.settings(upstream: upstreamPort),
                                             storagePath: storage, environment: environment)
        var token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let stream = try EventStreamTests.EventStreamClient(port: bridge.httpPort, token: token)
        let created = try await HTTP.send(bridge.httpPort, "/api/v1/watchdogs", method: "POST",
                                          body: Self.body(Self.silentKitchen), token: token)
        #expect(created.status == 201, "\(created.text)")
        let uuid = try #require(AlarmsAndHistoryTests.object(created)["uuid"] as? String)
        #expect(AlarmsAndHistoryTests.object(created)["state"] as? String == "armed")

        // Answering every 0.3 s: never silent for 2 s.
        try await Task.sleep(for: .seconds(3))
        #expect(events(watcher, "fired").isEmpty)

        // The upstream stops answering: one event, and only one however long it stays away.
        upstream.stop()
        let fired = try await watcher.waitFor(timeout: 10) { $0.text.contains(#""state":"fired""#) }
        #expect(fired.text.contains(uuid) && fired.text.contains(#""condition":"silent""#), "\(fired.text)")
        // The same event on the user's event stream.
        #expect(stream.waitFor("event: watchdog"), "\(stream.text.suffix(500))")
        #expect(stream.text.contains(#""state":"fired","uuid":"\#(uuid)""#))
        try await Task.sleep(for: .seconds(3))
        #expect(events(watcher, "fired").count == 1)
        let shown = try await HTTP.send(bridge.httpPort, "/api/v1/watchdogs/\(uuid)", method: "GET", token: token)
        #expect(AlarmsAndHistoryTests.object(shown)["state"] as? String == "fired")

        // A restart keeps the episode: still silent, not fired again.
        bridge.signal(SIGTERM)
        _ = bridge.waitForExit(timeout: 10)
        bridge = try await BridgeProcess(broker: broker, settings: RestSourceTests.settings(upstream: upstreamPort),
                                         storagePath: storage, environment: environment)
        token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        try await Task.sleep(for: .seconds(4))
        #expect(events(watcher, "fired").count == 1, "fired again after a restart")

        // It answers again: recovered; silent again: fired a second time.
        upstream = try RestSourceTests.Upstream(port: upstreamPort)
        let recovered = try await watcher.waitFor(timeout: 10) { $0.text.contains(#""state":"recovered""#) }
        #expect(recovered.text.contains(uuid))
        upstream.stop()
        _ = try await watcher.waitFor(timeout: 10) { _ in events(watcher, "fired").count == 2 }

        // Quiet hours around now hold it (an edit starts a new episode); without them it fires.
        upstream = try RestSourceTests.Upstream(port: upstreamPort)
        _ = try await watcher.waitFor(timeout: 10) { _ in events(watcher, "recovered").count == 2 }
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        func clock(_ date: Date) -> String {
            let parts = utc.dateComponents([.hour, .minute], from: date)
            return String(format: "%02d:%02d", parts.hour!, parts.minute!)
        }
        let quiet = #"{"title":"Kitchen sensor","room":"kitchen","sensor":"temperature","condition":"silent","for":"2s","quiet":{"from":"\#(clock(Date(timeIntervalSinceNow: -60)))","to":"\#(clock(Date(timeIntervalSinceNow: 300)))"}}"#
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/watchdogs/\(uuid)", method: "PUT", body: Self.body(quiet),
                                    token: token).status == 200)
        upstream.stop()
        try await Task.sleep(for: .seconds(5))
        #expect(events(watcher, "fired").count == 2, "fired inside its quiet hours")
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/watchdogs/\(uuid)", method: "PUT",
                                    body: Self.body(Self.silentKitchen), token: token).status == 200)
        _ = try await watcher.waitFor(timeout: 10) { _ in events(watcher, "fired").count == 3 }
    }

    @Test func crudValidationOwnershipAndTheCap() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_WATCHDOGS_MAX_PER_USER": "2"])
        let port = bridge.httpPort
        let alice = try await APITests.token(port, "Cemalettin", "12345")
        let bob = try await APITests.token(port, "Mehmet", "123456")
        let warm = #"{"title":"Too warm","room":"bedroom","sensor":"temperature","condition":"above","value":28,"for":"12h","quiet":{"from":"22:00","to":"07:00"}}"#
        let created = try await HTTP.send(port, "/api/v1/watchdogs", method: "POST", body: Self.body(warm), token: alice)
        #expect(created.status == 201)
        let uuid = try #require(AlarmsAndHistoryTests.object(created)["uuid"] as? String)
        #expect(AlarmsAndHistoryTests.object(created)["for"] as? String == "12h")
        #expect(try await HTTP.send(port, "/api/v1/watchdogs", method: "POST", body: Self.body(Self.silentKitchen),
                                    token: alice).status == 201)
        let third = try await HTTP.send(port, "/api/v1/watchdogs", method: "POST", body: Self.body(Self.silentKitchen),
                                        token: alice)
        #expect(third.status == 409 && third.text.contains("watchdogs.max_per_user"), "\(third.text)")
        // The cap is per user: another user may still add theirs.
        let bobs = try await HTTP.send(port, "/api/v1/watchdogs", method: "POST", body: Self.body(Self.silentKitchen),
                                       token: bob)
        #expect(bobs.status == 201)

        let bad = try await HTTP.send(port, "/api/v1/watchdogs", method: "POST", body: Self.body(
            #"{"title":"x","room":"bedroom","sensor":"temperature","condition":"above","for":"1h"}"#), token: alice)
        #expect(bad.status == 400 && bad.text.contains(#"field \"value\""#), "\(bad.text)")

        for (method, path) in [("GET", "/api/v1/watchdogs/\(uuid)"), ("PUT", "/api/v1/watchdogs/\(uuid)"),
                               ("DELETE", "/api/v1/watchdogs/\(uuid)"), ("POST", "/api/v1/watchdogs/\(uuid)/toggle")] {
            let reply = try await HTTP.send(port, path, method: method, body: method == "PUT" ? Self.body(warm) : nil,
                                            token: bob)
            #expect(reply.status == 404, "\(method) \(path)")
        }
        let toggled = try await HTTP.send(port, "/api/v1/watchdogs/\(uuid)/toggle", method: "POST", token: alice)
        #expect(AlarmsAndHistoryTests.object(toggled)["isEnabled"] as? Bool == false)
        let list = AlarmsAndHistoryTests.object(try await HTTP.send(port, "/api/v1/watchdogs", method: "GET", token: alice))
        #expect((list["watchdogs"] as? [[String: Any]])?.count == 2)
        #expect(try await HTTP.send(port, "/api/v1/watchdogs/\(uuid)", method: "DELETE", token: alice).status == 204)
        #expect(try await HTTP.send(port, "/api/v1/watchdogs/\(uuid)", method: "GET", token: alice).status == 404)
        #expect(try await HTTP.send(port, "/api/v1/watchdogs", method: "GET").status == 401)
    }
}
