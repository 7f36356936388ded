import BridgeCore
import BridgeStorage
import Foundation
import Testing

/// Alarms, history and restored state through the real bridge, database and broker.
@Suite(.timeLimit(.minutes(3)))
struct AlarmsAndHistoryTests {
    static func alarmBody(_ title: String, at date: Date, repeats: String = "never", action: String? = nil,
                          enabled: Bool = true) -> Data {
        let actionJSON = action.map { #","action":\#($0)"# } ?? ""
        return Data(#"{"title":"\#(title)","fireDate":"\#(Date.ISO8601FormatStyle().format(date))","repeats":"\#(repeats)","isEnabled":\#(enabled)\#(actionJSON)}"#.utf8)
    }

    static func object(_ reply: HTTP.Reply) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: reply.body) as? [String: Any]) ?? [:]
    }

    @Test func alarmCRUDValidationOwnershipQueryAndOrder() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, environment: ["SMARTHOME_SCHEDULER_TIMEZONE": "UTC"])
        let port = bridge.httpPort
        let alice = try await APITests.token(port, "Cemalettin", "12345")
        let bob = try await APITests.token(port, "Mehmet", "123456")
        let day = Date(timeIntervalSinceNow: 86_400 * 30)
        // Midnight in the scheduler's time zone (UTC, set above), not the machine's: the order below
        // is by time of day there (README, Alarms).
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let base = utc.startOfDay(for: day)

        let evening = try await HTTP.send(port, "/api/v1/alarms", method: "POST",
                                          body: Self.alarmBody("Evening lights", at: base.addingTimeInterval(20 * 3600),
                                                               repeats: "daily",
                                                               action: #"{"room":"livingroom","lights":"ON"}"#),
                                          token: alice)
        #expect(evening.status == 201)
        let eveningID = try #require(Self.object(evening)["uuid"] as? String)
        #expect(Self.object(evening)["isEnabled"] as? Bool == true)
        let morning = try await HTTP.send(port, "/api/v1/alarms", method: "POST",
                                          body: Self.alarmBody("Wake up", at: base.addingTimeInterval(86_400 + 7 * 3600)),
                                          token: alice)
        #expect(morning.status == 201)
        let morningID = try #require(Self.object(morning)["uuid"] as? String)

        // Sorted by time of day (07:00 before 20:00) whatever the date; q filters in any case.
        let list = try await HTTP.send(port, "/api/v1/alarms", method: "GET", token: alice)
        let titles = (Self.object(list)["alarms"] as? [[String: Any]])?.compactMap { $0["title"] as? String }
        #expect(titles == ["Wake up", "Evening lights"])
        let filtered = try await HTTP.send(port, "/api/v1/alarms?q=EVEN", method: "GET", token: alice)
        #expect((Self.object(filtered)["alarms"] as? [[String: Any]])?.count == 1)

        // Each bad field is named.
        for (body, field) in [(#"{"fireDate":"2026-12-01T07:00:00Z"}"#, "title"), (#"{"title":"x","fireDate":"soon"}"#, "fireDate"),
                              (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","repeats":"hourly"}"#, "repeats"),
                              (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","repeats":"weekly"}"#, "days"),
                              (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sun":{"event":"sunrise"}}"#, "sun"),
                              (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","action":{"room":"attic","lights":"ON"}}"#, "action.room")] {
            let reply = try await HTTP.send(port, "/api/v1/alarms", method: "POST", body: Data(body.utf8), token: alice)
            #expect(reply.status == 400)
            #expect(reply.text.contains(#"field \"\#(field)\""#), "\(reply.text)")
        }

        // Another user's alarm: 404 for every verb, and it stays untouched.
        for (method, path) in [("GET", "/api/v1/alarms/\(eveningID)"), ("PUT", "/api/v1/alarms/\(eveningID)"),
                               ("DELETE", "/api/v1/alarms/\(eveningID)"), ("POST", "/api/v1/alarms/\(eveningID)/toggle")] {
            let reply = try await HTTP.send(port, path, method: method,
                                            body: method == "PUT" ? Self.alarmBody("Mine now", at: day) : nil, token: bob)
            #expect(reply.status == 404, "\(method) \(path)")
        }
        #expect((Self.object(try await HTTP.send(port, "/api/v1/alarms", method: "GET", token: bob))["alarms"] as? [Any])?
            .isEmpty == true)

        let toggled = try await HTTP.send(port, "/api/v1/alarms/\(eveningID)/toggle", method: "POST", token: alice)
        #expect(toggled.status == 200)
        #expect(Self.object(toggled)["isEnabled"] as? Bool == false)
        let updated = try await HTTP.send(port, "/api/v1/alarms/\(morningID)", method: "PUT",
                                          body: Self.alarmBody("Get up", at: day, repeats: "daily"), token: alice)
        #expect(updated.status == 200)
        #expect(Self.object(try await HTTP.send(port, "/api/v1/alarms/\(morningID)", method: "GET", token: alice))["title"]
            as? String == "Get up")
        #expect(try await HTTP.send(port, "/api/v1/alarms/\(morningID)", method: "DELETE", token: alice).status == 204)
        #expect(try await HTTP.send(port, "/api/v1/alarms/\(morningID)", method: "GET", token: alice).status == 404)
        #expect(try await HTTP.send(port, "/api/v1/alarms", method: "GET").status == 401)
    }

    /// Weekly alarms and alarms relative to the sun (README "Alarms"): stored, answered with
    /// `nextFire`, kept across a restart (the migration's columns), and a weekly one fires on its day.
    @Test func weeklyAndSunAlarmsAnswerNextFireSurviveARestartAndFire() async throws {
        let broker = try await TestBroker()
        let storage = try TestFiles.makeDirectory("sun").appendingPathComponent("bridge.sqlite").path
        let place = ["SMARTHOME_SCHEDULER_TIMEZONE": "Europe/Berlin", "SMARTHOME_SCHEDULER_LATITUDE": "52.52",
                     "SMARTHOME_SCHEDULER_LONGITUDE": "13.41"]
        var bridge = try await BridgeProcess(broker: broker, storagePath: storage, environment: place)
        var token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/events"])

        let dusk = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST", body: Data(
            #"{"title":"Dusk","fireDate":"2026-01-01T00:00:00Z","repeats":"daily","sun":{"event":"sunset","offset":"-30m"}}"#.utf8),
            token: token)
        #expect(dusk.status == 201, "\(dusk.text)")
        let duskID = try #require(Self.object(dusk)["uuid"] as? String)
        let nextText = try #require(Self.object(dusk)["nextFire"] as? String, "\(dusk.text)")
        let next = try #require(try? Date(nextText, strategy: .iso8601))
        #expect(next > Date() && next < Date(timeIntervalSinceNow: 2 * 86_400), "\(nextText)")

        // A weekly alarm on today's weekday (Berlin), two seconds from now: fires once.
        var berlin = Calendar(identifier: .gregorian)
        berlin.timeZone = TimeZone(identifier: "Europe/Berlin")!
        let soon = Date(timeIntervalSinceNow: 2)
        let weekday = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"][berlin.component(.weekday, from: soon) - 1]
        let other = weekday == "mon" ? "tue" : "mon"
        let weekly = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST", body: Data(
            #"{"title":"Weekly","fireDate":"\#(Date.ISO8601FormatStyle().format(soon))","repeats":"weekly","days":["\#(other)","\#(weekday)"]}"#.utf8),
            token: token)
        #expect(weekly.status == 201, "\(weekly.text)")
        let weeklyID = try #require(Self.object(weekly)["uuid"] as? String)
        let event = try await watcher.waitFor(timeout: 10) { $0.text.contains(#""type":"alarm""#) }
        #expect(event.text.contains(weeklyID))

        // Disabled: no next firing, and the reason.
        let off = try await HTTP.send(bridge.httpPort, "/api/v1/alarms/\(duskID)/toggle", method: "POST", token: token)
        #expect(Self.object(off)["nextFire"] is NSNull)
        #expect(Self.object(off)["skipReason"] as? String == "disabled")

        // After a restart on the same database, both come back as they were.
        bridge.signal(SIGTERM)
        _ = bridge.waitForExit(timeout: 10)
        bridge = try await BridgeProcess(broker: broker, storagePath: storage, environment: place)
        token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let again = Self.object(try await HTTP.send(bridge.httpPort, "/api/v1/alarms/\(duskID)", method: "GET", token: token))
        #expect((again["sun"] as? [String: Any])?["offset"] as? String == "-30m")
        #expect((again["sun"] as? [String: Any])?["event"] as? String == "sunset")
        let weeklyAgain = Self.object(try await HTTP.send(bridge.httpPort, "/api/v1/alarms/\(weeklyID)", method: "GET",
                                                          token: token))
        #expect(Set(weeklyAgain["days"] as? [String] ?? []) == [weekday, other])
        #expect(weeklyAgain["nextFire"] is String, "a weekly alarm has a next firing after it fired")

        // Without a place the sun is refused, naming the field and the keys it needs.
        let unplaced = try await BridgeProcess(broker: broker)
        let refused = try await HTTP.send(unplaced.httpPort, "/api/v1/alarms", method: "POST", body: Data(
            #"{"title":"Dawn","fireDate":"2026-01-01T00:00:00Z","repeats":"daily","sun":{"event":"sunrise"}}"#.utf8),
            token: try await APITests.token(unplaced.httpPort, "Cemalettin", "12345"))
        #expect(refused.status == 400)
        #expect(refused.text.contains(#"field \"sun\""#) && refused.text.contains("scheduler.latitude"), "\(refused.text)")
    }

    @Test func anAlarmFiresItsEventAndActionOnceThenDisablesItself() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/#"])
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let created = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST",
                                          body: Self.alarmBody("Wake up", at: Date(timeIntervalSinceNow: 2),
                                                               action: #"{"room":"bedroom","lights":"TOGGLE"}"#),
                                          token: token)
        let uuid = try #require(Self.object(created)["uuid"] as? String)
        let event = try await watcher.waitFor(timeout: 10) {
            $0.topic == "smarthome/1/events" && $0.text.contains(#""type":"alarm""#)
        }
        let json = try JSONSerialization.jsonObject(with: Data(event.payload)) as? [String: Any]
        #expect(json?["uuid"] as? String == uuid)
        #expect(json?["title"] as? String == "Wake up")
        #expect(json?["firedAt"] as? String != nil)
        try await watcher.waitFor("smarthome/1/bedroom/lights", payload: "ON")
        try await Task.sleep(for: .seconds(2))  // a second firing would toggle the light back
        #expect(watcher.messages.filter { $0.topic == "smarthome/1/events" && $0.text.contains(#""type":"alarm""#) }.count == 1)
        #expect(watcher.last("smarthome/1/bedroom/lights") == "ON")
        let after = try await HTTP.send(bridge.httpPort, "/api/v1/alarms/\(uuid)", method: "GET", token: token)
        #expect(Self.object(after)["isEnabled"] as? Bool == false, "a one-shot alarm disables itself")
    }

    @Test func missedWhileDownFiresWithinGraceAndIsSkippedBeyond() async throws {
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/events"])
        for (grace, shouldFire) in [("10m", true), ("1s", false)] {
            let storage = try TestFiles.makeDirectory("missed").appendingPathComponent("bridge.sqlite").path
            let first = try await BridgeProcess(broker: broker, storagePath: storage)
            let token = try await APITests.token(first.httpPort, "Cemalettin", "12345")
            let created = try await HTTP.send(first.httpPort, "/api/v1/alarms", method: "POST",
                                              body: Self.alarmBody("While down \(grace)", at: Date(timeIntervalSinceNow: 2)),
                                              token: token)
            #expect(created.status == 201)
            first.signal(SIGKILL)
            _ = first.waitForExit(timeout: 5)
            try await Task.sleep(for: .seconds(4))  // the alarm comes due while the bridge is down
            watcher.clear()
            let second = try await BridgeProcess(broker: broker, storagePath: storage,
                                                 environment: ["SMARTHOME_SCHEDULER_GRACE": grace])
            if shouldFire {
                try await watcher.waitFor { $0.text.contains("While down \(grace)") }
            } else {
                #expect(await second.waitForLog("alarm skipped: missed by more than scheduler.grace"))
                try await Task.sleep(for: .seconds(1.5))
                #expect(!watcher.messages.contains { $0.text.contains("While down \(grace)") })
            }
        }
    }

    @Test func historyRecordsPublishedReadingsInOrderWithSinceAndLimit() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/kitchen/temperature"])
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        try await Task.sleep(for: .seconds(3))  // readings every 0.2 s, flushed every second
        let published = watcher.messages.map(\.text)
        // The history is flushed once a second: let the last of those readings reach the database.
        try await Task.sleep(for: .seconds(1.5))

        let reply = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature&limit=10000",
                                        method: "GET", token: token)
        #expect(reply.status == 200)
        let body = Self.object(reply)
        #expect(body["sensor"] as? String == "temperature")
        let points = try #require(body["points"] as? [[String: String]])
        #expect(points.count >= 3)
        let times = points.compactMap { $0["t"].flatMap { try? Date($0, strategy: .iso8601) } }
        #expect(times.count == points.count)
        #expect(times == times.sorted(), "oldest first")
        // What a subscriber saw live (after the retained value it got first) was recorded in the same order.
        let values = points.compactMap { $0["v"] }
        #expect(values.allSatisfy { (25.0...27.0).contains(Double($0) ?? 0) })
        let live = Array(published.dropFirst().prefix(5))
        #expect(live.count >= 2)
        let recorded = values.count >= live.count
            && (0...(values.count - live.count)).contains { Array(values[$0..<$0 + live.count]) == live }
        #expect(recorded, "live \(live) not found in history \(values)")

        let limited = Self.object(try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature&limit=2",
                                                      method: "GET", token: token))
        #expect((limited["points"] as? [[String: String]])?.map { $0["v"] ?? "" } == Array(values.prefix(2)))
        let since = points[points.count / 2]["t"]!
        let later = Self.object(try await HTTP.send(
            bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature&since=\(since)", method: "GET", token: token))
        #expect((later["points"] as? [[String: String]])?.first?["t"] == since)

        for query in ["sensor=movement", "sensor=temperature&limit=10001", "sensor=temperature&since=yesterday", ""] {
            let bad = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?\(query)", method: "GET",
                                          token: token)
            #expect(bad.status == 400, "\(query)")
        }
        #expect(try await HTTP.send(bridge.httpPort, "/api/v1/rooms/attic/history?sensor=temperature", method: "GET",
                                    token: token).status == 404)
    }

    @Test func retentionPrunesOldReadingsAndKeepsTheRest() async throws {
        let broker = try await TestBroker()
        let storage = try TestFiles.makeDirectory("retention").appendingPathComponent("bridge.sqlite").path
        // 100 rows 10 days old and 20 rows 6 days old (values the simulator never makes), with 7 days kept.
        let cutoff = Date(timeIntervalSinceNow: -7 * 86_400)
        let old = Date(timeIntervalSinceNow: -10 * 86_400)
        let recent = Date(timeIntervalSinceNow: -6 * 86_400)
        do {
            let database = try Database(path: storage)
            let rows = (0..<100).map {
                HistoryStore.Row(user: "1", room: "kitchen", sensor: "temperature", time: old.addingTimeInterval(Double($0)),
                                 value: "24.0")
            } + (0..<20).map {
                HistoryStore.Row(user: "1", room: "kitchen", sensor: "temperature",
                                 time: recent.addingTimeInterval(Double($0)), value: "24.5")
            }
            try HistoryStore(database: database).append(rows)
        }
        let bridge = try await BridgeProcess(broker: broker, storagePath: storage,
                                             environment: ["SMARTHOME_STORAGE_RETENTION_DAYS": "7"])
        #expect(await bridge.waitForLog("pruned old history rows=100"))
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let reply = Self.object(try await HTTP.send(bridge.httpPort, "/api/v1/rooms/kitchen/history?sensor=temperature",
                                                    method: "GET", token: token))
        let points = (reply["points"] as? [[String: String]] ?? []).compactMap { point -> (Date, String)? in
            guard let time = point["t"].flatMap({ try? Date($0, strategy: .iso8601) }), let value = point["v"] else { return nil }
            return (time, value)
        }
        #expect(!points.contains { $0.0 < cutoff }, "a reading older than storage.retention_days was kept")
        #expect(points.filter { $0.1 == "24.0" }.isEmpty)
        #expect(points.filter { $0.1 == "24.5" }.count == 20, "the readings inside the window are all kept")
    }

    @Test func lightsAndReadingsSurviveARestart() async throws {
        let broker = try await TestBroker()
        let storage = try TestFiles.makeDirectory("restore").appendingPathComponent("bridge.sqlite").path
        var bridge: BridgeProcess? = try await BridgeProcess(broker: broker, storagePath: storage)
        let client = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/#"])
        try client.publish("smarthome/1/kitchen/lights/set", "ON")
        try client.publish("smarthome/1/garden/lights/set", "TOGGLE")
        try await client.waitFor("smarthome/1/garden/lights", payload: "ON")
        bridge?.signal(SIGTERM)
        #expect(bridge?.waitForExit(timeout: 10) == 0)
        bridge = nil

        broker.kill()  // a fresh broker with no retained state: only the database remembers
        try await broker.start()
        bridge = try await BridgeProcess(broker: broker, storagePath: storage)
        let values = try await MQTTBridgeTests.collectRetained(port: broker.port)
        #expect(values["smarthome/1/kitchen/lights"] == "ON")
        #expect(values["smarthome/1/garden/lights"] == "ON")
        #expect(values["smarthome/1/bedroom/lights"] == "OFF")
        let kitchen = try await HTTP.get(bridge!.httpPort, "/rooms/1/Kitchen")
        #expect(try JSONDecoder().decode(sensorsModel.self, from: kitchen.body).SensorValues[2] == "On")
        #expect(bridge!.log.contains("restored last values from the database"))
    }

    @Test func databaseSurvivesTwentySIGKILLsDuringHeavyHistoryWrites() async throws {
        let broker = try await TestBroker()
        let folder = try TestFiles.makeDirectory("heavy")
        let storage = folder.appendingPathComponent("bridge.sqlite").path
        var created: [String] = []
        var random = SeededGenerator(seed: 3)  // the kill times, the same every run
        for round in 0..<20 {
            // Interval 0: the simulator runs flat out, so history is written as fast as it goes.
            let bridge = try await BridgeProcess(broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 0\n",
                                                 storagePath: storage)
            let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
            for index in 0..<3 {
                let reply = try await HTTP.send(bridge.httpPort, "/api/v1/alarms", method: "POST",
                                                body: Self.alarmBody("Round \(round) #\(index)", at: Date(timeIntervalSinceNow: 86_400)),
                                                token: token)
                if reply.status == 201, let uuid = Self.object(reply)["uuid"] as? String { created.append(uuid) }
            }
            // Batches are written every second: kill somewhere in the second or third batch.
            try await Task.sleep(for: .milliseconds(Int.random(in: 1000...2000, using: &random)))
            bridge.signal(SIGKILL)
            _ = bridge.waitForExit(timeout: 10)
        }
        let database = try Database(path: storage)
        #expect(try database.query("PRAGMA integrity_check").first?.first?.text == "ok")
        let stored = try AlarmStore(database: database).alarms(userID: "1").map(\.uuid)
        #expect(Set(created).isSubset(of: Set(stored)), "\(Set(created).subtracting(stored).count) alarms lost")
        #expect(created.count == 60)
        let rows = try HistoryStore(database: database).count()
        #expect(rows > 0)
        print("crash safety: 20 SIGKILLs during history writes, \(created.count) alarms kept, \(rows) readings stored")
    }
}
