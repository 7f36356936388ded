import BridgeCore
import BridgeHTTP
import BridgeRuntime
import Foundation
import Synchronization
import Testing

/// `source.kind: rest` against an upstream the test controls: it answers normally, slowly, with
/// 500, with garbage, with the wrong shape, or not at all.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct RestSourceTests {
    enum Mode: String, Sendable, CaseIterable {
        case normal, serverError, garbage, wrongShape, mismatched, slow
    }

    /// The test's upstream: serves the seed route for every room, in a mode chosen per room, and
    /// records every request.
    final class Upstream: Sendable {
        struct Request: Sendable {
            var method: String
            var path: String
            var body: String
        }

        /// What the handler (on the server's threads) and the test share.
        final class State: Sendable {
            let modes = Mutex<[String: Mode]>([:])
            let temperature = Mutex<String>("25.5")
            let requests = Mutex<[Request]>([])
            let commandStatus = Mutex<Int>(200)
            /// "user/Room display name" → the light as the upstream has it ("On" until told otherwise).
            let lights = Mutex<[String: String]>([:])
            /// "user/Room display name" → its gas sensor's value ("Okey" unless set).
            let gas = Mutex<[String: String]>([:])
            /// Seconds the upstream takes to answer a light command.
            let commandDelay = Mutex<Double>(0)
        }

        let port: Int
        private let server: HTTPServer
        private let state = State()

        init(port: Int = 0) throws {
            let state = state
            server = HTTPServer(configuration: HTTPServerConfiguration(port: port, threadPoolSize: 8)) { request in
                state.requests.withLock {
                    $0.append(Request(method: request.method, path: request.path,
                                      body: String(decoding: request.body, as: UTF8.self)))
                }
                let parts = request.path.split(separator: "/").map(String.init)
                if parts.first == "lights" {
                    // A device that does what it is told when it answers 2xx, and nothing otherwise.
                    let delay = state.commandDelay.withLock { $0 }
                    if delay > 0 { usleep(UInt32(delay * 1_000_000)) }
                    let status = state.commandStatus.withLock { $0 }
                    let body = String(decoding: request.body, as: UTF8.self)
                    if (200..<300).contains(status), parts.count == 3 {
                        let wanted = body.contains(#""state":"ON""#) ? "On" : body.contains(#""state":"OFF""#) ? "Off" : nil
                        if let wanted { state.lights.withLock { $0["\(parts[1])/\(parts[2])"] = wanted } }
                    }
                    return HTTPResponse(status: status, body: Array("{}".utf8))
                }
                guard parts.count == 3, parts[0] == "rooms" else { return HTTPResponse(status: 404) }
                let room = parts[2]
                let light = state.lights.withLock { $0["\(parts[1])/\(room)"] ?? "On" }
                let json: String
                switch state.modes.withLock({ $0[room] ?? .normal }) {
                case .normal:
                    let value = state.temperature.withLock { $0 }
                    let gas = state.gas.withLock { $0["\(parts[1])/\(room)"] ?? "Okey" }
                    let last = room == "Kitchen" || room == "Bathroom" ? ("Gas", gas) : ("Movement", "Detected")
                    json = #"{"SensorNames":["Temperature","Humidity","Lights","\#(last.0)","Pressure"],"SensorIcon":["temperature","humidity","On","\#(last.1)","pressure"],"SensorValues":["\#(value)","55.0","\#(light)","\#(last.1)","1013 hPa"]}"#
                case .serverError: return HTTPResponse(status: 500, body: Array("database on fire".utf8))
                case .garbage: json = "<html>not json at all</html>"
                case .wrongShape: json = #"{"rooms":["Kitchen"]}"#
                case .mismatched: json = #"{"SensorNames":["Temperature","Humidity"],"SensorIcon":["temperature"],"SensorValues":["25.0"]}"#
                case .slow:
                    usleep(1_500_000)
                    json = #"{"SensorNames":["Temperature"],"SensorIcon":["temperature"],"SensorValues":["20.0"]}"#
                }
                return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array(json.utf8))
            }
            try server.start()
            self.port = server.port
        }

        func set(_ mode: Mode, for room: String) { state.modes.withLock { $0[room] = mode } }
        func setTemperature(_ value: String) { state.temperature.withLock { $0 = value } }
        func setCommandStatus(_ status: Int) { state.commandStatus.withLock { $0 = status } }
        func setCommandDelay(_ seconds: Double) { state.commandDelay.withLock { $0 = seconds } }
        /// `value`: "Gas" or "Okey", as the seed backend says it.
        func setGas(_ value: String, user: String = "1", room: String) { state.gas.withLock { $0["\(user)/\(room)"] = value } }
        func polls(of room: String) -> Int {
            state.requests.withLock { $0.filter { $0.path.hasSuffix("/\(room)") }.count }
        }
        var commands: [Request] { state.requests.withLock { $0.filter { $0.path.hasPrefix("/lights") } } }
        /// The light of `room` (display name) as the upstream has it.
        func light(user: String = "1", _ room: String) -> String {
            state.lights.withLock { $0["\(user)/\(room)"] ?? "On" }
        }
        func stop() { server.stop() }
    }

    static func settings(upstream port: Int, timeout: Double = 0.5, extra: String = "") -> String {
        """
        http:
          legacy_routes: true
        source:
          kind: rest
          base_url: http://127.0.0.1:\(port)
          interval: 0.3
          timeout: \(timeout)
          failures_before_offline: 3
          max_backoff: 1
        \(extra)
        """
    }

    /// The `source.lights_command` lines sending `{"state":"ON"}` or `OFF` to `/lights/<user>/<Room>`.
    static func lightsCommand(method: String) -> String {
        """
          lights_command:
            method: \(method)
            path: /lights/{userID}/{room}
            body: '{"state":"{state}"}'
        """
    }

    @Test func normalAnswersBecomeTopicsAndUnknownSensorsPassThrough() async throws {
        let upstream = try Upstream()
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/#"])
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(upstream: upstream.port))
        try await watcher.waitFor("smarthome/1/kitchen/temperature", payload: "25.5")
        try await watcher.waitFor("smarthome/1/kitchen/pressure", payload: "1013 hPa")
        try await watcher.waitFor("smarthome/1/garden/movement", payload: "ON")
        try await watcher.waitFor("smarthome/1/kitchen/availability", payload: "online")
        // Lights are the bridge's own when no lights_command is set: the upstream's "On" is ignored.
        #expect(watcher.last("smarthome/1/kitchen/lights") == "OFF")
        let room = try await watcher.waitFor { $0.topic == "smarthome/1/kitchen" && $0.text.contains("Pressure") }
        #expect(room.text.contains(#""SensorValues":["25.5","55.0","Off","Okey","1013 hPa"]"#), "\(room.text)")
        let http = try await HTTP.get(bridge.httpPort, "/rooms/1/Kitchen")
        #expect(try JSONDecoder().decode(sensorsModel.self, from: http.body).SensorNames.last == "Pressure")

        upstream.setTemperature("26.1")
        try await watcher.waitFor("smarthome/1/kitchen/temperature", payload: "26.1")
        // Only changes are published: an unchanged humidity is not sent again on every poll.
        try await Task.sleep(for: .seconds(1))
        #expect(watcher.messages.filter { $0.topic == "smarthome/1/kitchen/humidity" }.count == 1)
        #expect(bridge.log.contains("source.lights_command is not set"))
    }

    @Test(arguments: Mode.allCases.filter { $0 != .normal })
    func eachFailureKindTakesOnlyThatRoomOfflineUntilItRecovers(mode: Mode) async throws {
        let upstream = try Upstream()
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/#"])
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(upstream: upstream.port))
        try await watcher.waitFor("smarthome/1/kitchen/temperature", payload: "25.5")

        let pollsBefore = upstream.polls(of: "Kitchen")
        upstream.set(mode, for: "Kitchen")
        try await watcher.waitFor("smarthome/1/kitchen/availability", payload: "offline")
        // The last values stay, over MQTT and HTTP.
        #expect(watcher.last("smarthome/1/kitchen/temperature") == "25.5")
        let kept = try await HTTP.get(bridge.httpPort, "/rooms/1/Kitchen")
        #expect(try JSONDecoder().decode(sensorsModel.self, from: kept.body).SensorValues.first == "25.5")
        // Other rooms keep being polled on time meanwhile.
        let bedroomBefore = upstream.polls(of: "Bedroom")
        try await Task.sleep(for: .seconds(1.5))
        #expect(upstream.polls(of: "Bedroom") - bedroomBefore >= 3, "other rooms were held up")
        #expect(watcher.last("smarthome/1/bedroom/availability") == "online")
        // A log line when the problem changes, not one per poll (a slow machine may add a timeout).
        let failedPolls = upstream.polls(of: "Kitchen") - pollsBefore
        let lines = bridge.log.split(separator: "\n").filter { $0.contains("upstream poll failed user=1 room=kitchen") }
        // (A loaded machine may turn some polls into timeouts, each change of problem one more line.)
        #expect(!lines.isEmpty && lines.count * 2 <= failedPolls, "\(failedPolls) polls: \(lines)")

        watcher.clear()
        upstream.set(.normal, for: "Kitchen")
        try await watcher.waitFor("smarthome/1/kitchen/availability", payload: "online")
        #expect(bridge.log.contains("upstream room answers again user=1 room=kitchen"))
    }

    @Test func theUpstreamKilledAndRestartedIsRecoveredFrom() async throws {
        let upstream = try Upstream()
        let port = upstream.port
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/+/+/availability"])
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(upstream: port))
        try await watcher.waitFor("smarthome/2/balcony/availability", payload: "online")
        upstream.stop()
        try await watcher.waitFor("smarthome/2/balcony/availability", payload: "offline")
        try await watcher.waitFor("smarthome/1/kitchen/availability", payload: "offline")
        watcher.clear()
        let restarted = try Upstream(port: port)
        try await watcher.waitFor("smarthome/2/balcony/availability", payload: "online")
        try await watcher.waitFor("smarthome/1/kitchen/availability", payload: "online")
        #expect(restarted.polls(of: "Kitchen") > 0)
        #expect(try await HTTP.get(bridge.httpPort, "/healthz").status == 200)
    }

    @Test func lightCommandsAreForwardedWithTheTemplateAndRefusalsReported() async throws {
        let upstream = try Upstream()
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/#"])
        // A timeout a loaded machine never reaches by accident: every command here must get its answer.
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(upstream: upstream.port, timeout: 2,
                                                                                 extra: Self.lightsCommand(method: "PUT")))
        try await watcher.waitFor("smarthome/1/kitchen/availability", payload: "online")
        upstream.setTemperature("25.5")

        // The upstream's own light state ("On") is taken as it is when commands go to it.
        try await watcher.waitFor("smarthome/1/kitchen/lights", payload: "ON")
        try watcher.publish("smarthome/1/kitchen/lights/set", "TOGGLE")
        try await watcher.waitFor(timeout: 5) { _ in !upstream.commands.isEmpty }
        let forwarded = try #require(upstream.commands.first)
        #expect(forwarded.method == "PUT")
        #expect(forwarded.path == "/lights/1/Kitchen")
        #expect(forwarded.body == #"{"state":"OFF"}"#)
        // Accepted: the bridge publishes OFF, and the upstream, asked again by the polls, agrees.
        try await watcher.waitFor("smarthome/1/kitchen/lights", payload: "OFF")
        #expect(upstream.light("Kitchen") == "Off")
        let kitchenPolls = upstream.polls(of: "Kitchen")
        _ = await eventually(timeout: 5) { upstream.polls(of: "Kitchen") >= kitchenPolls + 3 }
        #expect(watcher.last("smarthome/1/kitchen/lights") == "OFF")
        let kitchen = try await HTTP.get(bridge.httpPort, "/rooms/1/Kitchen")
        #expect(try JSONDecoder().decode(sensorsModel.self, from: kitchen.body).SensorValues[2] == "Off")

        // Refused: nothing changes, neither on the upstream nor on the bridge.
        upstream.setCommandStatus(409)
        watcher.clear()
        try watcher.publish("smarthome/1/bedroom/lights/set", "OFF")
        let event = try await watcher.waitFor { $0.topic == "smarthome/1/events" && $0.text.contains("upstream_refused") }
        #expect(event.text.contains("409"))
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let refused = try await HTTP.send(bridge.httpPort, "/api/v1/rooms/garden/lights", method: "POST",
                                          body: Data(#"{"state":"OFF"}"#.utf8), token: token)
        #expect(refused.status == 409)
        #expect(refused.text.contains("upstream answered 409"))
        #expect(upstream.commands.count == 3)
        let polls = upstream.polls(of: "Bedroom") + upstream.polls(of: "Garden")
        _ = await eventually(timeout: 5) { upstream.polls(of: "Bedroom") + upstream.polls(of: "Garden") >= polls + 6 }
        #expect(upstream.light("Bedroom") == "On" && upstream.light("Garden") == "On")
        #expect(!watcher.messages.contains { $0.topic.hasSuffix("/lights") && $0.text == "OFF" }, "a refused command applied")
        for room in ["Bedroom", "Garden"] {
            let reply = try await HTTP.get(bridge.httpPort, "/rooms/1/\(room)")
            #expect(try JSONDecoder().decode(sensorsModel.self, from: reply.body).SensorValues[2] == "On", "\(room)")
        }
    }

    @Test func lightCommandsTheUpstreamFailsAreRejectedAndChangeNothing() async throws {
        let upstream = try Upstream()
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port, subscribe: ["smarthome/1/#"])
        // A timeout a loaded machine never reaches by accident; the slow answer below takes twice as long.
        let timeout = 2.0
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(
            upstream: upstream.port, timeout: timeout, extra: Self.lightsCommand(method: "POST")))
        // Polled rooms start with their lights off until the upstream's answer (On) comes in.
        for room in ["kitchen", "bedroom", "garden"] { try await watcher.waitFor("smarthome/1/\(room)/lights", payload: "ON") }
        watcher.clear()
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        func command(_ room: String) async throws -> HTTP.Reply {
            try await HTTP.send(bridge.httpPort, "/api/v1/rooms/\(room)/lights", method: "POST",
                                body: Data(#"{"state":"OFF"}"#.utf8), token: token)
        }

        // A server error: refused over MQTT (an event) and the API (409).
        upstream.setCommandStatus(500)
        try watcher.publish("smarthome/1/kitchen/lights/set", "OFF")
        let event = try await watcher.waitFor { $0.topic == "smarthome/1/events" && $0.text.contains("upstream_refused") }
        #expect(event.text.contains("upstream answered 500"), "\(event.text)")
        let failed = try await command("kitchen")
        #expect(failed.status == 409)
        #expect(failed.text.contains("upstream answered 500"), "\(failed.text)")

        // An upstream slower than source.timeout: refused as unreachable, not left hanging.
        upstream.setCommandDelay(2 * timeout)
        let slow = try await command("bedroom")
        #expect(slow.status == 409)
        #expect(slow.text.contains("upstream unreachable: timed out"), "\(slow.text)")
        upstream.setCommandDelay(0)

        // No upstream at all.
        upstream.stop()
        let gone = try await command("garden")
        #expect(gone.status == 409)
        #expect(gone.text.contains("upstream unreachable: connection failed"), "\(gone.text)")

        // None of them switched anything.
        let switchedOff = watcher.messages.filter { $0.topic.hasSuffix("/lights") && $0.text == "OFF" }.map(\.topic)
        #expect(switchedOff.isEmpty, "a failed command applied: \(switchedOff)")
        for room in ["Kitchen", "Bedroom", "Garden"] {
            #expect(upstream.light(room) == "On", "\(room) on the upstream")
            let reply = try await HTTP.get(bridge.httpPort, "/rooms/1/\(room)")
            #expect(try JSONDecoder().decode(sensorsModel.self, from: reply.body).SensorValues[2] == "On", "\(room)")
        }
        #expect(bridge.log.contains("command rejected"))
    }

    @Test func gasComingAndGoingIsAnEventOnMQTTAndTheEventStream() async throws {
        let upstream = try Upstream()
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker.port,
                                               subscribe: ["smarthome/1/events", "smarthome/2/events", "smarthome/+/+/gas"])
        let bridge = try await BridgeProcess(broker: broker, settings: Self.settings(upstream: upstream.port))
        // Every gas room's first poll answered (in REST mode a first value, OFF, comes with a gas
        // event of its own); from here on only the changes made below may raise events.
        let gasTopics = ["1", "2"].flatMap { user in ["kitchen", "bathroom"].map { "smarthome/\(user)/\($0)/gas" } }
        for topic in gasTopics { try await watcher.waitFor(topic, payload: "OFF") }
        try await Task.sleep(for: .milliseconds(300))
        watcher.clear()
        let token = try await APITests.token(bridge.httpPort, "Cemalettin", "12345")
        let stream = try EventStreamTests.EventStreamClient(port: bridge.httpPort, token: token)
        #expect(stream.waitFor("retry: 3000"))

        for (value, state) in [("Gas", "ON"), ("Okey", "OFF")] {
            upstream.setGas(value, room: "Kitchen")
            let event = try await watcher.waitFor {
                $0.topic == "smarthome/1/events" && $0.text.contains(#""type":"gas","room":"kitchen","state":"\#(state)""#)
            }
            #expect(!event.retain)
            let json = try JSONSerialization.jsonObject(with: Data(event.payload)) as? [String: Any]
            #expect(json?["room"] as? String == "kitchen")
            #expect((json?["at"] as? String).flatMap { try? Date($0, strategy: .iso8601) } != nil, "\(event.text)")
            try await watcher.waitFor("smarthome/1/kitchen/gas", payload: state)
            #expect(stream.waitFor("event: gas\ndata: \(event.text)"), "stream: \(stream.text.suffix(300))")
        }
        let gasEvents = watcher.messages.filter { $0.topic == "smarthome/1/events" && $0.text.contains(#""type":"gas""#) }
        #expect(gasEvents.count == 2, "one event when gas comes, one when it goes: \(gasEvents.map(\.text))")
        #expect(!watcher.messages.contains { $0.topic == "smarthome/2/events" }, "the other user's kitchen had no gas")
    }
}
