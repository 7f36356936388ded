import BridgeCore
import BridgeRuntime
import Foundation
import Testing

/// The bridge against a real mosquitto: retained state, commands, rejections, restarts.
@Suite(.timeLimit(.minutes(2)))
struct MQTTBridgeTests {
    static let demoRooms: [String: [String]] = [
        "1": ["livingroom", "bathroom", "bedroom", "kitchen", "garden", "saloon", "babyroom", "balcony"],
        "2": ["garden", "bathroom", "bedroom", "kitchen", "saloon", "livingroom", "babyroom", "balcony"],
    ]

    /// Every topic the demo config's retained state consists of.
    static var retainedTopics: Set<String> {
        var topics: Set<String> = ["smarthome/bridge/state", "smarthome/bridge/info"]
        for (user, rooms) in demoRooms {
            for room in rooms {
                topics.insert("smarthome/\(user)/\(room)")
                topics.insert("smarthome/\(user)/\(room)/availability")
                let extra = room == "kitchen" || room == "bathroom" ? "gas" : "movement"
                for sensor in ["temperature", "humidity", "lights", extra] {
                    topics.insert("smarthome/\(user)/\(room)/\(sensor)")
                }
            }
        }
        return topics
    }

    /// Subscribes afresh and waits until every retained topic has arrived as a retained message.
    /// A subscriber that came while the bridge was still handing its state to the broker gets some
    /// of it live instead; then a fresh subscriber, a moment later, must get all of it retained.
    /// It subscribes to each topic exactly: RabbitMQ gives retained messages to no wildcard filter
    /// (docs/brokers.md), and an app or Home Assistant reads a state topic exactly too.
    static func collectRetained(broker: TestBroker) async throws -> [String: String] {
        try await collectRetained(port: broker.port, username: broker.username, password: broker.password)
    }

    static func collectRetained(port: Int, username: String? = nil, password: String? = nil) async throws
        -> [String: String] {
        let wanted = retainedTopics
        var missing: Set<String> = []
        for _ in 0..<3 {
            let subscriber = try await TestSubscriber(broker: port, subscribe: wanted.sorted(), username: username,
                                                      password: password)
            let complete = await eventually(timeout: 5) {
                wanted.isSubset(of: Set(subscriber.messages.filter(\.retain).map(\.topic)))
            }
            if complete {
                var values: [String: String] = [:]
                for message in subscriber.messages where message.retain { values[message.topic] = message.text }
                return values
            }
            missing = wanted.subtracting(subscriber.messages.filter(\.retain).map(\.topic))
        }
        throw TestFailure("retained topics missing: \(missing.sorted().prefix(5)) (\(missing.count) in all)")
    }

    @Test func allSixteenRoomsArePublishedRetainedInTheContractsVocabulary() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        _ = bridge
        let values = try await Self.collectRetained(broker: broker)  // throws unless every topic arrived
        #expect(values["smarthome/bridge/state"] == "online")
        for (topic, payload) in values {
            switch topic.split(separator: "/").last! {
            case "temperature": #expect((25.0...27.0).contains(Double(payload) ?? 0), "\(topic)=\(payload)")
            case "humidity": #expect((50.0...60.0).contains(Double(payload) ?? 0), "\(topic)=\(payload)")
            case "lights": #expect(payload == "OFF")
            case "movement", "gas": #expect(["ON", "OFF"].contains(payload), "\(topic)=\(payload)")
            case "availability": #expect(payload == "online", "\(topic)=\(payload)")
            default: break
            }
        }
        let kitchen = try JSONDecoder().decode(SensorsModel.self, from: Data(values["smarthome/1/kitchen"]!.utf8))
        #expect(kitchen.SensorNames == ["Temperature", "Humidity", "Lights", "Gas"])
        #expect(kitchen.SensorValues[2] == "Off")
        let info = try JSONSerialization.jsonObject(with: Data(values["smarthome/bridge/info"]!.utf8)) as? [String: Any]
        #expect(info?["source"] as? String == "simulated")
        #expect(info?["rooms"] as? Int == 16)
        #expect(info?["version"] as? String == "0.1.0")
    }

    @Test func toggleFlipsTheLightOnMQTTAndHTTP() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        // The light's topic exactly as well, for its retained state (no wildcard gets it on RabbitMQ).
        let client = try await TestSubscriber(broker: broker,
                                              subscribe: ["smarthome/1/#", "smarthome/1/kitchen/lights"])
        try await client.waitFor("smarthome/1/kitchen/lights", payload: "OFF")
        client.clear()

        try client.publish("smarthome/1/kitchen/lights/set", "TOGGLE")
        try await client.waitFor("smarthome/1/kitchen/lights", payload: "ON")
        let roomJSON = try await client.waitFor { $0.topic == "smarthome/1/kitchen" && $0.text.contains("\"On\"") }
        #expect(try JSONDecoder().decode(SensorsModel.self, from: Data(roomJSON.payload)).SensorValues[2] == "On")
        let room = try await HTTP.get(bridge.httpPort, "/rooms/1/Kitchen")
        #expect(try JSONDecoder().decode(SensorsModel.self, from: room.body).SensorValues[2] == "On")

        for (payload, expected) in [("off", "Off"), (#"{"state":"ON"}"#, "On"), ("toggle", "Off")] {
            client.clear()
            try client.publish("smarthome/1/kitchen/lights/set", payload)
            try await client.waitFor { $0.topic == "smarthome/1/kitchen" && $0.text.contains("\"\(expected)\",\"Okey\"]}") }
            let body = try await HTTP.get(bridge.httpPort, "/rooms/1/kitchen").body
            #expect(try JSONDecoder().decode(SensorsModel.self, from: body).SensorValues[2] == expected)
        }
        // The other user's kitchen was never touched.
        let other = try await HTTP.get(bridge.httpPort, "/rooms/2/Kitchen")
        #expect(try JSONDecoder().decode(SensorsModel.self, from: other.body).SensorValues[2] == "Off")
    }

    @Test func badCommandsAreRejectedWithAnEventAndChangeNothing() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        // The light's topic exactly as well, for its retained state (no wildcard gets it on RabbitMQ).
        let client = try await TestSubscriber(broker: broker,
                                              subscribe: ["smarthome/1/#", "smarthome/1/kitchen/lights"])
        try await client.waitFor("smarthome/1/kitchen/lights", payload: "OFF")

        let cases: [(topic: String, payload: String, reason: String)] = [
            ("smarthome/1/kitchen/lights/set", "bogus", "bad_payload"),
            ("smarthome/1/kitchen/lights/set", #"{"state":"DIM"}"#, "bad_payload"),
            ("smarthome/1/attic/lights/set", "ON", "unknown_room"),
            ("smarthome/1/kitchen/temperature/set", "ON", "not_a_light"),
        ]
        for (topic, payload, reason) in cases {
            try client.publish(topic, payload)
            let event = try await client.waitFor {
                $0.topic == "smarthome/1/events" && $0.text.contains("\"topic\":\"\(topic)\"")
                    && $0.text.contains("\"reason\":\"\(reason)\"")
            }
            let json = try JSONSerialization.jsonObject(with: Data(event.payload)) as? [String: Any]
            #expect(json?["type"] as? String == "command_rejected")
            #expect((json?["message"] as? String)?.isEmpty == false)
            #expect(event.retain == false)
            client.clear()
        }
        // An empty payload is how a retained command is cleared (README): ignored, no event. The
        // next command's event shows the empty one was handled first and said nothing.
        try client.publish("smarthome/1/kitchen/lights/set", "")
        try client.publish("smarthome/1/attic/lights/set", "ON")
        _ = try await client.waitFor { $0.topic == "smarthome/1/events" && $0.text.contains("attic") }
        #expect(!client.messages.contains { $0.topic == "smarthome/1/events" && $0.text.contains("kitchen/lights/set") })
        // Unknown user: no events topic to tell, but a log line.
        try client.publish("smarthome/9/kitchen/lights/set", "ON")
        #expect(await bridge.waitForLog("reason=unknown_user"))

        let body = try await HTTP.get(bridge.httpPort, "/rooms/1/Kitchen").body
        #expect(try JSONDecoder().decode(SensorsModel.self, from: body).SensorValues[2] == "Off")
        #expect(!client.messages.contains { $0.topic == "smarthome/1/kitchen/lights" && $0.text == "ON" })
        #expect(bridge.log.contains("command rejected"))
    }

    @Test func aStaleRetainedCommandNeverSwitchesTheLight() async throws {
        let broker = try await TestBroker()
        let setup = try await TestSubscriber(broker: broker)
        try setup.publish("smarthome/1/bedroom/lights/set", "ON", retain: true)
        #expect(await setup.client.waitForPublished(timeout: 5))

        let bridge = try await BridgeProcess(broker: broker)
        if TestBrokerKind.current == .rabbitmq {
            // RabbitMQ never hands the bridge the retained command (its command subscription is a
            // wildcard), so there is nothing to ignore; the command must still be there, unapplied.
            let reader = try await TestSubscriber(broker: broker, subscribe: ["smarthome/1/bedroom/lights/set"])
            #expect(try await reader.waitFor("smarthome/1/bedroom/lights/set", payload: "ON").retain)
            #expect(!bridge.log.contains("ignored a retained command"))
        } else {
            #expect(await bridge.waitForLog("ignored a retained command"))
        }
        let body = try await HTTP.get(bridge.httpPort, "/rooms/1/Bedroom").body
        #expect(try JSONDecoder().decode(SensorsModel.self, from: body).SensorValues[2] == "Off")
        let values = try await Self.collectRetained(broker: broker)
        #expect(values["smarthome/1/bedroom/lights"] == "OFF")
    }

    @Test func brokerRestartIsSurvivedAndStateRepublished() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(
            broker: broker, environment: ["SMARTHOME_MQTT_RECONNECT_MIN": "1", "SMARTHOME_MQTT_RECONNECT_MAX": "2"])
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 200))
        let client = try await TestSubscriber(broker: broker, subscribe: ["smarthome/1/#"])
        try client.publish("smarthome/1/garden/lights/set", "ON")
        try await client.waitFor("smarthome/1/garden/lights", payload: "ON")

        broker.kill()
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 503))
        let down = try await HTTP.get(bridge.httpPort, "/healthz")
        #expect(down.text.contains("\"mqtt\":\"disconnected\""))

        try await broker.start()  // a fresh broker: no persistence, no retained messages
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 200))
        #expect(await bridge.waitForRetainedPublish(count: 2))
        let values = try await Self.collectRetained(broker: broker)
        #expect(values["smarthome/bridge/state"] == "online")
        #expect(values["smarthome/1/garden/lights"] == "ON", "state from before the restart is kept")
        #expect(bridge.log.contains("lost connection to broker"))
    }

    @Test func cleanShutdownPublishesOfflineAndAKillLeavesTheLastWill() async throws {
        let broker = try await TestBroker()
        let watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/bridge/state"])

        let first = try await BridgeProcess(broker: broker)
        try await watcher.waitFor("smarthome/bridge/state", payload: "online")
        watcher.clear()
        first.signal(SIGTERM)
        #expect(first.waitForExit(timeout: 10) == 0)
        try await watcher.waitFor("smarthome/bridge/state", payload: "offline")
        #expect(first.log.contains("stopped"))

        let second = try await BridgeProcess(broker: broker)
        try await watcher.waitFor("smarthome/bridge/state", payload: "online")
        watcher.clear()
        second.signal(SIGKILL)
        try await watcher.waitFor("smarthome/bridge/state", payload: "offline")  // the broker's last will

        let third = try await BridgeProcess(broker: broker)
        try await watcher.waitFor("smarthome/bridge/state", payload: "online")
        watcher.clear()
        third.signal(SIGINT)
        #expect(third.waitForExit(timeout: 10) == 0)
        try await watcher.waitFor("smarthome/bridge/state", payload: "offline")
    }

    /// The embedded broker is always mosquitto: nothing to run again on RabbitMQ.
    @Test(.enabled(if: TestBrokerKind.current == .mosquitto))
    func withoutAnMQTTURLTheBridgeRunsItsOwnBroker() async throws {
        let bridge = try await BridgeProcess(broker: nil)
        #expect(await bridge.waitForLog("started the embedded mosquitto broker"))
        let line = try #require(bridge.log.split(separator: "\n").first { $0.contains("listening=mqtt://127.0.0.1:") })
        let port = try #require(line.firstMatch(of: /listening=mqtt:\/\/127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) })

        // No anonymous client gets in (README, "Try it"); the local account's password is in a file
        // only this user may read, which the log names, with the command to watch the topics.
        let anonymous = try AccountClient(port: port, username: nil, password: nil)
        #expect(await anonymous.firstOutcome()?.hasPrefix("refused") == true)
        let path = try #require(line.firstMatch(of: /password_file=(\S+)/).map { String($0.1) })
        #expect(path == bridge.directory.appendingPathComponent("bridge.mqtt-password").path)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let password = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(password.count == 24)
        #expect(bridge.log.contains("watch with mosquitto_sub -p \(port) -u local -P \"$(cat \(path))\""))
        let wrong = try AccountClient(port: port, username: "local", password: password + "x")
        #expect(await wrong.firstOutcome()?.hasPrefix("refused") == true)
        let values = try await Self.collectRetained(port: port, username: "local", password: password)
        #expect(values.count >= Self.retainedTopics.count)
        #expect(values["smarthome/bridge/state"] == "online")

        // The local account switches lights but cannot plant a reading. The broker handles one
        // client's publishes in order and delivers to one subscriber in order, so once the switched
        // light has arrived, a fake temperature that got through would have arrived before it.
        let local = try AccountClient(port: port, username: "local", password: password,
                                      subscribe: ["smarthome/1/kitchen/lights", "smarthome/1/kitchen/temperature"])
        let lights = try await local.waitFor { $0.topic == "smarthome/1/kitchen/lights" && $0.retain }
        try await local.waitFor { $0.topic == "smarthome/1/kitchen/temperature" && $0.retain }
        try local.publish("smarthome/1/kitchen/temperature", "99.9", retain: true)
        try local.publish("smarthome/1/kitchen/lights/set", lights.text == "ON" ? "OFF" : "ON")
        try await local.waitFor { $0.topic == "smarthome/1/kitchen/lights" && !$0.retain && $0.text != lights.text }
        #expect(!local.messages.contains { $0.text == "99.9" }, "the local account planted a reading")
        #expect(local.messages.contains { $0.topic == "smarthome/1/kitchen/temperature" })

        bridge.signal(SIGTERM)
        #expect(bridge.waitForExit(timeout: 10) == 0)
        #expect(!LoopbackPort.isAccepting(port: port), "the embedded broker stops with the bridge")
    }
}

extension MQTTBridgeTests {
    /// README, "If port 1883 is already taken ... the embedded broker picks a free port and the
    /// bridge logs which one": here the port it tries first (`mqtt.embedded_port`) is another
    /// mosquitto's, as a system broker's would be (the tests never touch the shared 1883).
    @Test(.enabled(if: TestBrokerKind.current == .mosquitto))
    func theEmbeddedBrokerMovesToAFreePortWhenItsPortIsTaken() async throws {
        let occupant = try await TestBroker()
        let bridge = try await BridgeProcess(broker: nil, environment: ["SMARTHOME_MQTT_EMBEDDED_PORT": String(occupant.port)])
        #expect(await bridge.waitForLog("port \(occupant.port) was taken (another broker?)"))
        let line = try #require(bridge.log.split(separator: "\n").first { $0.contains("listening=mqtt://127.0.0.1:") })
        let port = try #require(line.firstMatch(of: /listening=mqtt:\/\/127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) })
        let passwordFile = try #require(line.firstMatch(of: /password_file=(\S+)/).map { String($0.1) })
        #expect(port != occupant.port)
        #expect(bridge.log.contains("watch with mosquitto_sub -p \(port) "))
        let password = try String(contentsOfFile: passwordFile, encoding: .utf8).trimmingCharacters(in: .newlines)
        // throws unless every topic arrived
        let values = try await Self.collectRetained(port: port, username: "local", password: password)
        #expect(values["smarthome/bridge/state"] == "online")
        // Nothing went to the broker that had the port.
        let other = try await TestSubscriber(broker: occupant.port, subscribe: ["smarthome/#"])
        try await Task.sleep(for: .milliseconds(500))
        #expect(other.messages.isEmpty, "the other broker got \(other.messages.prefix(3).map(\.topic))")
    }
}

/// The iPhone app's model of a room's sensors, exactly as the app declares it.
struct SensorsModel: Decodable {
    let SensorNames: [String]
    let SensorValues: [String]
    let SensorIcon: [String]
}
