import BridgeCore
import BridgeRuntime
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Broker and network faults injected around the real bridge and real mosquitto brokers
/// (docs/reliability.md lists what each test injects and the figures it measured). Random outage
/// lengths come from a fixed seed, so a run can be repeated.
/// The long ones (a 60 s blackhole, a 30 s frozen broker, a 5 min outage) are in FaultLongTests.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct FaultTests {
    // MARK: 1. Broker crashes and restarts

    @Test func brokerKilledTwentyTimesIsReconnectedEveryTime() async throws {
        let broker = try await FaultBroker()
        let reconnectMax = 1.0
        let bridge = try await BridgeProcess(
            broker: nil, settings: Fault.settings(interval: 1, reconnectMin: 0.5, reconnectMax: reconnectMax),
            environment: ["SMARTHOME_MQTT_URL": broker.url])
        let started = Date()
        var latencies: [Double] = []
        var outages: [Double] = []
        var random = SeededGenerator(seed: 1)
        for round in 1...20 {
            try await Task.sleep(for: .milliseconds(Int.random(in: 300...1000, using: &random)))
            broker.kill()
            let killed = Date()
            #expect(await Fault.waitForHealth(bridge.httpPort, 503, timeout: 3) != nil, "round \(round): loss not seen")
            let outage = Double.random(in: 0.5...3, using: &random)
            outages.append(outage)
            try await Task.sleep(for: .milliseconds(max(0, Int((outage - Date().timeIntervalSince(killed)) * 1000))))
            try await broker.start()
            let reopened = Date()
            guard let back = await Fault.waitForHealth(bridge.httpPort, 200, timeout: reconnectMax + 5) else {
                Issue.record("round \(round): the bridge did not reconnect")
                continue
            }
            latencies.append(back.timeIntervalSince(reopened))
        }
        #expect(latencies.count == 20)
        #expect(latencies.allSatisfy { $0 <= reconnectMax + 1 }, "reconnect latencies \(latencies)")
        // The broker came back empty each time: the whole home is there again anyway (this throws
        // unless every retained topic arrived).
        let values = try await MQTTBridgeTests.collectRetained(port: broker.port)
        #expect(values["smarthome/bridge/state"] == "online")
        try await Task.sleep(for: .milliseconds(1500))  // the history is written once a second
        let readings = try await Fault.publishedReadings(httpPort: bridge.httpPort, since: started)
        let count = readings.values.map(\.count).reduce(0, +)
        #expect(count >= 1000, "readings published during the kills")
        Fault.report("1 brokerKilledTwentyTimes", [
            "kills": "20", "outage_s": "\(Fault.format(outages.min() ?? 0))-\(Fault.format(outages.max() ?? 0))",
            "reconnect_after_reopen_max_s": Fault.format(latencies.max() ?? -1),
            "reconnect_after_reopen_mean_s": Fault.format(latencies.reduce(0, +) / Double(max(latencies.count, 1))),
            "reconnect_max_s": Fault.format(reconnectMax), "readings": String(count),
            "duration_s": Fault.format(Date().timeIntervalSince(started)),
        ])
    }

    @Test func gracefulRestartsLoseNoReadingForAPersistentSubscriber() async throws {
        let broker = try await FaultBroker(persistence: true)
        let bridge = try await BridgeProcess(
            broker: nil, settings: Fault.settings(interval: 0.2, reconnectMin: 0.2, reconnectMax: 1),
            environment: ["SMARTHOME_MQTT_URL": broker.url])
        let subscriber = try await FaultSubscriber(port: broker.port, subscribe: ["smarthome/+/+/+"], cleanSession: false,
                                                   name: "persistent")
        let since = Date()
        var restarts = 0
        var readings: [String: [String]] = [:]
        var random = SeededGenerator(seed: 2)
        while restarts < 5 || readings.values.map(\.count).reduce(0, +) < 1000 {
            try await Task.sleep(for: .milliseconds(Int.random(in: 500...1500, using: &random)))
            broker.stopGracefully()
            try await Task.sleep(for: .milliseconds(Int.random(in: 500...2000, using: &random)))
            try await broker.start()
            restarts += 1
            #expect(await Fault.waitForHealth(bridge.httpPort, 200, timeout: 5) != nil)
            readings = try await Fault.publishedReadings(httpPort: bridge.httpPort, since: since)
            if restarts >= 20 { break }
        }
        // Everything published up to a second ago has had time to arrive.
        try await Task.sleep(for: .seconds(3))
        let until = Date().addingTimeInterval(-1.5)
        readings = try await Fault.publishedReadings(httpPort: bridge.httpPort, since: since, until: until)
        let (missing, total) = Fault.missing(published: readings, received: subscriber.messages)
        #expect(total >= 1000)
        #expect(missing == 0, "readings the persistent subscriber never got")
        Fault.report("1 gracefulRestartsPersistentSubscriber", [
            "restarts": String(restarts), "readings": String(total), "missed": String(missing),
            "received_messages": String(subscriber.messages.count),
        ])
    }

    // MARK: 5. Wrong credentials

    @Test func wrongCredentialsAreReportedAndRetriedAtTheMaximumDelay() async throws {
        let broker = try await FaultBroker(accounts: ["bridge": "right-password"])
        let reconnectMax = 2.0
        let started = Date()
        let bridge = try await UnconnectedBridge(
            settings: Fault.settings(reconnectMin: 0.25, reconnectMax: reconnectMax),
            environment: ["SMARTHOME_MQTT_URL": broker.url, "SMARTHOME_MQTT_USERNAME": "bridge",
                          "SMARTHOME_MQTT_PASSWORD": "wrong-password"])
        var reportedAfter: Double?
        while reportedAfter == nil, Date().timeIntervalSince(started) < 10 {
            if let reply = try? await HTTP.get(bridge.httpPort, "/healthz"), reply.status == 503,
               reply.text.contains("broker refused: not authorised") {
                reportedAfter = Date().timeIntervalSince(started)
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect((reportedAfter ?? 99) <= 5, "/healthz reported the refusal after \(reportedAfter ?? -1) s")
        try await Task.sleep(for: .seconds(12))
        #expect(bridge.process.isRunning, "the bridge does not exit")
        let attempts = Fault.logTimes(bridge.log, containing: "broker refused: not authorised")
        let gaps = zip(attempts.dropFirst(), attempts).map { $0.timeIntervalSince($1) }
        #expect(attempts.count >= 6)
        // 0.25, 0.5, 1, 2, 2, ... (each 80-100 %): the last ones at the maximum.
        let settled = gaps.suffix(3)
        // (Log times carry a little scheduling noise, hence the margins.)
        #expect(settled.allSatisfy { $0 >= 0.8 * reconnectMax - 0.2 && $0 <= reconnectMax + 0.5 }, "gaps \(gaps)")
        #expect(gaps.allSatisfy { $0 <= reconnectMax + 0.5 }, "gaps \(gaps)")

        // Credentials fixed on the broker's side: the bridge comes back by itself.
        broker.accounts = ["bridge": "wrong-password"]
        broker.stopGracefully()
        try await broker.start()
        let reopened = Date()
        let back = await Fault.waitForHealth(bridge.httpPort, 200, timeout: reconnectMax + 3)
        #expect(back != nil)
        let recovery = back.map { $0.timeIntervalSince(reopened) } ?? -1
        #expect(recovery <= reconnectMax + 1)
        Fault.report("5 wrongCredentials", [
            "healthz_reported_after_s": Fault.format(reportedAfter ?? -1),
            "attempt_gaps_s": gaps.map(Fault.format).joined(separator: ","),
            "reconnect_max_s": Fault.format(reconnectMax), "recovered_after_fix_s": Fault.format(recovery),
        ])
    }

    // MARK: 6. Last will

    @Test func lastWillOnKillAndOnlineAgainAfterRestart() async throws {
        let broker = try await FaultBroker()
        let watcher = try await FaultSubscriber(port: broker.port, subscribe: ["smarthome/bridge/state"], name: "watcher")
        let first = try await BridgeProcess(broker: nil, settings: Fault.settings(),
                                            environment: ["SMARTHOME_MQTT_URL": broker.url])
        #expect(await watcher.waitFor("smarthome/bridge/state", payload: "online") != nil)
        let killed = Date()
        first.signal(SIGKILL)
        let offline = await watcher.waitFor("smarthome/bridge/state", payload: "offline", since: killed, timeout: 5)
        let offlineAfter = offline.map { $0.at.timeIntervalSince(killed) } ?? -1
        #expect(offline != nil && offlineAfter <= 2, "offline after \(offlineAfter) s")
        _ = first.waitForExit(timeout: 5)

        let restarted = Date()
        let second = try await BridgeProcess(broker: nil, settings: Fault.settings(),
                                             environment: ["SMARTHOME_MQTT_URL": broker.url])
        let online = await watcher.waitFor("smarthome/bridge/state", payload: "online", since: restarted)
        let connected = Fault.logTimes(second.log, containing: "connected to broker").first
        let onlineAfter = online.flatMap { message in connected.map { message.at.timeIntervalSince($0) } } ?? -1
        #expect(online != nil && connected != nil && onlineAfter <= 2, "online \(onlineAfter) s after connecting")
        Fault.report("6 lastWill", [
            "offline_after_kill_s": Fault.format(offlineAfter), "online_after_connect_s": Fault.format(onlineAfter),
        ])
    }

    // MARK: 7. Commands after broker restarts

    @Test func aCommandOneSecondAfterEachOfTenRestartsIsApplied() async throws {
        let broker = try await FaultBroker()
        let bridge = try await BridgeProcess(
            broker: nil, settings: Fault.settings(interval: 0.5, reconnectMin: 0.2, reconnectMax: 0.5),
            environment: ["SMARTHOME_MQTT_URL": broker.url])
        let commander = try await FaultSubscriber(port: broker.port, name: "commander")
        var applied = 0
        var latencies: [Double] = []
        for round in 1...10 {
            broker.kill()
            _ = await Fault.waitForHealth(bridge.httpPort, 503, timeout: 3)
            try await broker.start()
            guard let back = await Fault.waitForHealth(bridge.httpPort, 200, timeout: 5) else {
                Issue.record("round \(round): no reconnect")
                continue
            }
            try await Task.sleep(for: .milliseconds(max(0, Int((1 - Date().timeIntervalSince(back)) * 1000))))
            let wanted = round.isMultiple(of: 2) ? "Off" : "On"
            let sent = Date()
            try commander.publish("smarthome/1/kitchen/lights/set", wanted.uppercased())
            let switched = await eventuallyTrue(timeout: 5) {
                Self.lights(bridge, room: "Kitchen") == wanted
            }
            if switched {
                applied += 1
                latencies.append(Date().timeIntervalSince(sent))
            }
        }
        #expect(applied == 10)
        Fault.report("7 commandAfterRestarts", [
            "applied": "\(applied)/10", "apply_latency_max_s": Fault.format(latencies.max() ?? -1),
        ])
    }

    /// The light's value over the legacy HTTP route ("On"/"Off"), synchronously (for polling).
    static func lights(_ bridge: BridgeProcess, room: String, user: String = "1") -> String? {
        guard let fd = RawClient.connect(from: "127.0.0.1", port: bridge.httpPort, receiveTimeout: 2) else { return nil }
        defer { close(fd) }
        RawClient.send(fd, Array("GET /rooms/\(user)/\(room) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        let reply = String(decoding: RawClient.readAll(fd), as: UTF8.self)
        guard let start = reply.range(of: "\r\n\r\n") else { return nil }
        let body = Data(reply[start.upperBound...].utf8)
        return (try? JSONDecoder().decode(SensorsModel.self, from: body))?.SensorValues[2]
    }

    // MARK: 8. TOGGLE across forced reconnects

    @Test func fiveHundredTogglesAcrossFiveForcedReconnectsAreAppliedOnceEach() async throws {
        let broker = try await FaultBroker()
        let proxy = try FaultProxy(upstreamPort: broker.port)
        let bridge = try await BridgeProcess(
            // 100 commands a second for 5 s: past the default command rate (README "Security model").
            broker: nil, settings: Fault.settings(interval: 1, reconnectMin: 0.2, reconnectMax: 0.5)
                + "commands:\n  rate: 1000\n  burst: 1000\n",
            environment: ["SMARTHOME_MQTT_URL": "mqtt://127.0.0.1:\(proxy.port)"])
        let commander = try await FaultSubscriber(port: broker.port, name: "commander")
        let before = Self.lights(bridge, room: "Garden")
        #expect(before == "Off")
        let connectsBefore = bridge.log.components(separatedBy: "connected to broker").count - 1
        // A slow link: when it is reset, the bridge has applied the last ~100 ms of commands but the
        // broker has not had their acknowledgements, so it sends them again after the reconnect.
        let slowLink = FaultProxy.Mode.delay(0.1)
        proxy.mode = slowLink
        for index in 0..<500 {
            try commander.publish("smarthome/1/garden/lights/set", "TOGGLE")
            if index % 100 == 50 {
                proxy.mode = .reset
                try await Task.sleep(for: .milliseconds(30))
                proxy.mode = slowLink
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await commander.client.waitForPublished(timeout: 10))
        /// The state each applied TOGGLE left the garden light in, in order.
        func applied() -> [String] {
            bridge.log.split(separator: "\n").filter {
                $0.contains("light switched") && $0.contains("room=garden") && $0.contains("command=TOGGLE")
            }.map { line in line.split(separator: " ").first { $0.hasPrefix("state=") }.map(String.init) ?? "?" }
        }
        _ = await eventuallyTrue(timeout: 30) { applied().count >= 500 }
        try await Task.sleep(for: .seconds(2))  // anything applied twice would show by now
        let states = applied()
        let count = states.count
        // Each TOGGLE flipped the light: from Off, ON, OFF, ON, ... exactly, 250 of each.
        let alternating = (0..<500).map { $0.isMultiple(of: 2) ? "state=ON" : "state=OFF" }
        #expect(states == alternating, "states after each TOGGLE: \(states.prefix(8))... (\(count))")
        let ignored = bridge.log.components(separatedBy: "ignored a redelivered TOGGLE").count - 1
        let reconnects = bridge.log.components(separatedBy: "connected to broker").count - 1 - connectsBefore
        let final = Self.lights(bridge, room: "Garden")
        #expect(reconnects >= 5)
        #expect(ignored > 0, "the reconnects should have made the broker send some commands again")
        #expect(count == 500, "TOGGLEs applied")
        #expect(final == "Off", "500 toggles from Off end Off")
        Fault.report("8 togglesAcrossReconnects", [
            "sent": "500", "applied": String(count), "redeliveries_ignored": String(ignored),
            "forced_reconnects": String(reconnects), "final": final ?? "?",
        ])
    }

    // MARK: 9. HTTP abuse while MQTT works

    @Test func httpAbuseNeitherStopsTheServerNorMQTT() async throws {
        let broker = try await FaultBroker()
        let timeout = 2
        let bridge = try await BridgeProcess(
            broker: nil,
            settings: Fault.settings(interval: 0.2, http: "  connection_timeout: \(timeout)\n  max_connections_per_address: 8\n"),
            environment: ["SMARTHOME_MQTT_URL": broker.url])
        let subscriber = try await FaultSubscriber(port: broker.port, subscribe: ["smarthome/+/+/+"])
        let abuseStarted = Date()

        // 200 slowloris connections from 25 addresses (8 each, at the per-address limit): a request
        // line and one header, then silence.
        var slow: [(fd: Int32, sentAt: Date)] = []
        for index in 0..<200 {
            let source = "127.0.0.\(10 + index / 8)"
            guard let fd = RawClient.connect(from: source, port: bridge.httpPort) else { continue }
            RawClient.send(fd, Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8))
            slow.append((fd, Date()))
        }
        #expect(slow.count == 200)

        // The 9th connection from one address is refused: closed without an answer.
        let crowded = (0..<8).compactMap { _ in RawClient.connect(from: "127.0.0.250", port: bridge.httpPort) }
        for fd in crowded { RawClient.send(fd, Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)) }
        // The kernel completes a connection before the server accepts it: give the server the
        // moment it takes to count the eight, or the ninth may come first.
        try await Task.sleep(for: .milliseconds(300))
        var ninthAnswer = "no connection"
        if let ninth = RawClient.connect(from: "127.0.0.250", port: bridge.httpPort, receiveTimeout: 3) {
            RawClient.send(ninth, Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
            ninthAnswer = String(decoding: RawClient.readAll(ninth), as: UTF8.self)
            close(ninth)
        }
        #expect(!ninthAnswer.hasPrefix("HTTP/1.1 200"), "the 9th connection from one address got \(ninthAnswer.prefix(40))")

        // A normal client from another address is still answered, at once.
        let normalStarted = Date()
        var normalAnswer = ""
        if let normal = RawClient.connect(from: "127.0.0.251", port: bridge.httpPort) {
            RawClient.send(normal, Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
            normalAnswer = String(decoding: RawClient.readAll(normal), as: UTF8.self)
            close(normal)
        }
        let normalSeconds = Date().timeIntervalSince(normalStarted)
        #expect(normalAnswer.hasPrefix("HTTP/1.1 200"), "normal client got \(normalAnswer.prefix(40))")

        // A 1 MiB body is refused with 413.
        var bigAnswer = ""
        if let big = RawClient.connect(from: "127.0.0.252", port: bridge.httpPort) {
            let body = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
            RawClient.send(big, Array(("POST /api/v1/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n").utf8))
            RawClient.send(big, body)
            bigAnswer = String(decoding: RawClient.readAll(big), as: UTF8.self)
            close(big)
        }
        #expect(bigAnswer.hasPrefix("HTTP/1.1 413"), "1 MiB body got \(bigAnswer.prefix(40))")

        // Every slowloris connection is closed by the server within the timeout + 1 s.
        var closedAfter: [Double] = []
        var open = slow
        let deadline = Date().addingTimeInterval(Double(timeout) + 5)
        while !open.isEmpty, Date() < deadline {
            var fds = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            _ = poll(&fds, nfds_t(fds.count), 50)
            var still: [(fd: Int32, sentAt: Date)] = []
            for (index, connection) in open.enumerated() {
                if fds[index].revents != 0 {
                    var byte: UInt8 = 0
                    let count = recv(connection.fd, &byte, 1, Int32(MSG_DONTWAIT))
                    if count <= 0 {
                        closedAfter.append(Date().timeIntervalSince(connection.sentAt))
                        close(connection.fd)
                        continue
                    }
                }
                still.append(connection)
            }
            open = still
        }
        for connection in open { close(connection.fd) }
        for fd in crowded { close(fd) }
        #expect(open.isEmpty, "\(open.count) slowloris connections still open")
        #expect(closedAfter.allSatisfy { $0 <= Double(timeout) + 1 }, "closed after up to \(closedAfter.max() ?? -1) s")
        let abuseEnded = Date()

        // MQTT never paused: sensor readings kept arriving every step.
        let arrivals = subscriber.messages.map(\.at).filter { $0 >= abuseStarted && $0 <= abuseEnded }.sorted()
        let gaps = zip(arrivals.dropFirst(), arrivals).map { $0.timeIntervalSince($1) }
        let longestGap = gaps.max() ?? 99
        #expect(arrivals.count > 10)
        #expect(longestGap < 1, "longest pause in MQTT publishing \(longestGap) s")
        #expect(try await HTTP.get(bridge.httpPort, "/healthz").status == 200)
        Fault.report("9 httpAbuse", [
            "slowloris": String(slow.count), "slowloris_closed_after_max_s": Fault.format(closedAfter.max() ?? -1),
            "connection_timeout_s": String(timeout), "ninth_connection": ninthAnswer.isEmpty ? "closed" : String(ninthAnswer.prefix(12)),
            "big_body": String(bigAnswer.prefix(12)), "normal_client_s": Fault.format(normalSeconds),
            "mqtt_longest_gap_s": Fault.format(longestGap), "mqtt_messages_during_abuse": String(arrivals.count),
        ])
    }
}
