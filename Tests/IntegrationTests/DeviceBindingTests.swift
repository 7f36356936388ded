import BridgeCore
import BridgeHTTP
import BridgeMQTT
import BridgeRuntime
import Foundation
import Synchronization
import Testing

/// Sensors bound to real devices (README, "Connect your devices"), against a real mosquitto: the
/// test publishes what each device publishes (payloads from each device's own documentation) and
/// answers light commands as the device does.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct DeviceBindingTests {
    /// The demo password hash of "12345" (config/bridge.yaml), for a third user with devices.
    static let hash = "$argon2id$v=19$m=65536,t=2,p=1$AFwYLl14V6VLFBq3mN1oNA$z0YImiO0MUlUwjAJcNkvPZsytpsLsNbqpDuYtqrpMOU"

    static func settings(_ extra: String = "") -> String {
        "http:\n  legacy_routes: true\nsource:\n  interval: 0.2\n  seed: 7\ndevices:\n  command_timeout: 1s\n" + extra
    }

    static func user(_ rooms: String) -> String {
        """
          - id: "3"
            username: Devon
            password_hash: "\(hash)"
            rooms:
        \(rooms)
        """
    }

    static let presets = user("""
              - name: Bedroom
                sensors:
                  - { name: Temperature, zigbee2mqtt: { device: bed_climate }, expire_after: 30s }
                  - { name: Humidity, zigbee2mqtt: { device: bed_climate } }
                  - { name: Movement, zigbee2mqtt: { device: bed_motion } }
                  - { name: Lights, zigbee2mqtt: { device: bed_lamp } }
              - name: Garden
                sensors:
                  - { name: Temperature, tasmota: { topic: garden_plug } }
                  - { name: Humidity, tasmota: { topic: garden_plug } }
                  - { name: Lights, tasmota: { topic: garden_plug } }
              - name: Hall
                sensors:
                  - { name: Temperature, shelly: { prefix: shellyplusht-hall } }
                  - { name: Humidity, shelly: { prefix: shellyplusht-hall } }
                  - { name: Lights, shelly: { prefix: shelly1-hall } }
              - name: Study
                sensors:
                  - { name: Temperature, esphome: { prefix: esp-study, object_id: temperature } }
                  - { name: Movement, esphome: { prefix: esp-study, object_id: motion } }
                  - { name: Lights, esphome: { prefix: esp-study, object_id: lamp } }
              - name: Patio
                sensors:
                  - { name: Temperature, rtl_433: { model: Bresser-6in1, id: 411042499 } }
                  - { name: Humidity, rtl_433: { model: Bresser-6in1, id: 411042499 } }
                  - Lights
              - name: Attic
                sensors:
                  - { name: Temperature, mqtt: { topic: home/attic/climate, value: /temp, unit: "°F" }, precision: 1 }
                  - { name: Lights, mqtt: { command_topic: home/attic/lamp/set, state_topic: home/attic/lamp,
                                            payload_on: "1", payload_off: "0", availability_topic: home/attic/lamp/up } }
                  - Gas
        """)

    /// A running broker and a bridge with the preset rooms, a subscriber on everything of user 3.
    struct Home {
        let broker: TestBroker
        let bridge: BridgeProcess
        let watcher: TestSubscriber
        let device: TestSubscriber

        init(extraUsers: String = DeviceBindingTests.presets, settings: String = DeviceBindingTests.settings(),
             storagePath: String? = nil) async throws {
            broker = try await TestBroker()
            bridge = try await BridgeProcess(broker: broker, settings: settings, extraUsers: extraUsers,
                                             storagePath: storagePath)
            watcher = try await TestSubscriber(broker: broker, subscribe: ["smarthome/3/#", "homeassistant/#"],
                                               name: "watcher")
            device = try await TestSubscriber(broker: broker, subscribe: [
                "zigbee2mqtt/+/set", "cmnd/+/+", "shelly1-hall/command/+", "esp-study/+/+/command", "home/attic/lamp/set",
            ], name: "device")
        }

        /// Publishes as a device and waits for the bridge's topic to show `payload`.
        func expect(_ topic: String, _ payload: String, after publish: () throws -> Void) async throws {
            try publish()
            _ = try await watcher.waitFor { $0.topic == topic && $0.text == payload }
        }
    }

    static func room(_ home: Home, _ name: String) async throws -> [String: Any] {
        let reply = try await HTTP.get(home.bridge.httpPort, "/rooms/3/\(name)")
        return try JSONSerialization.jsonObject(with: reply.body) as? [String: Any] ?? [:]
    }

    @Test func eachPresetsReadingsReachTopicsRoomJSONAndSeedRoutes() async throws {
        let home = try await Home()
        let device = home.device
        try await home.expect("smarthome/3/bedroom/temperature", "21.5") {
            try device.publish("zigbee2mqtt/bed_climate", #"{"battery":97,"humidity":48.3,"linkquality":120,"temperature":21.5}"#)
        }
        _ = try await home.watcher.waitFor("smarthome/3/bedroom/humidity", payload: "48.3")
        try await home.expect("smarthome/3/bedroom/movement", "ON") {
            try device.publish("zigbee2mqtt/bed_motion", #"{"occupancy":true,"battery":100}"#)
        }
        // Tasmota in Fahrenheit (TempUnit F) is converted.
        try await home.expect("smarthome/3/garden/temperature", "21.1") {
            try device.publish("tele/garden_plug/SENSOR",
                               #"{"Time":"2026-12-01T10:00:00","AM2301":{"Temperature":70.0,"Humidity":55.0,"DewPoint":53.6},"TempUnit":"F"}"#)
        }
        _ = try await home.watcher.waitFor("smarthome/3/garden/humidity", payload: "55.0")
        try await home.expect("smarthome/3/hall/temperature", "22.4") {
            try device.publish("shellyplusht-hall/status/temperature:0", #"{"id":0,"tC":22.4,"tF":72.3}"#)
        }
        try await home.expect("smarthome/3/hall/humidity", "61.0") {
            try device.publish("shellyplusht-hall/status/humidity:0", #"{"id":0,"rh":61.0}"#)
        }
        try await home.expect("smarthome/3/study/temperature", "23.2") {
            try device.publish("esp-study/sensor/temperature/state", "23.2")
        }
        try await home.expect("smarthome/3/study/movement", "ON") {
            try device.publish("esp-study/binary_sensor/motion/state", "ON")
        }
        try await home.expect("smarthome/3/attic/temperature", "20.0") {
            try device.publish("home/attic/climate", #"{"temp":68.0}"#)
        }

        // The room JSON and the seed route say the same, with the last-seen times.
        let bedroom = try await Self.room(home, "Bedroom")
        #expect(bedroom["SensorValues"] as? [String] == ["21.5", "48.3", "Detected", "Off"])
        let lastSeen = try #require(bedroom["SensorLastSeen"] as? [Any])
        #expect(lastSeen.count == 4)
        #expect(lastSeen[0] is String && lastSeen[2] is String, "\(lastSeen)")
        #expect(lastSeen[3] is NSNull, "the lamp has not reported yet")
        let roomTopic = try await home.watcher.waitFor { $0.topic == "smarthome/3/bedroom" && $0.text.contains("\"Detected\"") }
        #expect(roomTopic.text.contains("\"SensorLastSeen\""))
        // A room without devices keeps the seed shape exactly (the iPhone app's three keys only).
        let kitchen = try JSONSerialization.jsonObject(with: try await HTTP.get(home.bridge.httpPort, "/rooms/1/Kitchen").body)
            as? [String: Any]
        #expect(kitchen?.keys.sorted() == ["SensorIcon", "SensorNames", "SensorValues"])

        // An unbound sensor of a room with devices still comes from the simulator.
        _ = try await home.watcher.waitFor { $0.topic == "smarthome/3/attic/gas" }

        // Home Assistant: the room's availability beside the bridge's, and expire_after where set.
        let config = try await home.watcher.waitFor { $0.topic.hasSuffix("/smarthome_3_bedroom/temperature/config") }
        let json = try JSONSerialization.jsonObject(with: Data(config.payload)) as? [String: Any]
        #expect(json?["expire_after"] as? Int == 30)
        let availability = (json?["availability"] as? [[String: Any]])?.compactMap { $0["topic"] as? String }
        #expect(availability == ["smarthome/bridge/state", "smarthome/3/bedroom/availability"])
        #expect(json?["unique_id"] as? String == "smarthome_3_bedroom_temperature")
    }

    @Test func rtl433sOwnDecoderFeedsBoundSensors() async throws {
        let home = try await Home()
        // A Bresser 6-in-1 frame from rtl_433's own device source, decoded by Debian's rtl_433, its
        // JSON piped into mosquitto_pub as rtl_433's MQTT output would publish it.
        let frame = "{205}55555555545ba999263100058631fffffe66d006092bffe0cff8"
        let script = "rtl_433 -F json -y '\(frame)' 2>/dev/null | mosquitto_pub -p \(home.broker.port) "
            + "-u '\(home.broker.username ?? "")' -P '\(home.broker.password ?? "")' -l -t rtl_433/testhost/events"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", home.broker.username == nil ? script.replacing("-u '' -P '' ", with: "") : script]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        _ = try await home.watcher.waitFor("smarthome/3/patio/temperature", payload: "3.00")
        _ = try await home.watcher.waitFor("smarthome/3/patio/humidity", payload: "95.0")
        // Another device's event is not this sensor's.
        try home.device.publish("rtl_433/testhost/events", #"{"model":"Bresser-6in1","id":7,"temperature_C":30.0}"#)
        try await Task.sleep(for: .milliseconds(300))
        #expect(home.watcher.last("smarthome/3/patio/temperature") == "3.00")
    }

    /// Each preset's light: the command reaches the device in its own form, the state is
    /// published only when the device reports it.
    @Test(arguments: [
        ("bedroom", "zigbee2mqtt/bed_lamp/set", #"{"state":"ON"}"#, "zigbee2mqtt/bed_lamp", #"{"state":"ON","brightness":254}"#),
        ("garden", "cmnd/garden_plug/POWER", "ON", "stat/garden_plug/POWER", "ON"),
        ("hall", "shelly1-hall/command/switch:0", "on", "shelly1-hall/status/switch:0", #"{"id":0,"output":true,"source":"MQTT"}"#),
        ("study", "esp-study/light/lamp/command", #"{"state":"ON"}"#, "esp-study/light/lamp/state", #"{"state":"ON","brightness":255}"#),
        ("attic", "home/attic/lamp/set", "1", "home/attic/lamp", "1"),
    ])
    func lightsAreSwitchedOnTheDeviceAndConfirmedByIt(room: String, commandTopic: String, command: String,
                                                      stateTopic: String, report: String) async throws {
        let home = try await Home()
        try home.watcher.publish("smarthome/3/\(room)/lights/set", "ON")
        let sent = try await home.device.waitFor { $0.topic == commandTopic }
        #expect(sent.text == command)
        try await Task.sleep(for: .milliseconds(200))
        #expect(home.watcher.last("smarthome/3/\(room)/lights") != "ON", "published before the device confirmed")
        try home.device.publish(stateTopic, report)
        _ = try await home.watcher.waitFor("smarthome/3/\(room)/lights", payload: "ON")
        let seed = try await Self.room(home, room)
        #expect((seed["SensorValues"] as? [String])?.contains("On") == true)
    }

    @Test func aLightThatDoesNotConfirmIsRejectedAndUnchanged() async throws {
        let home = try await Home()
        try home.watcher.publish("smarthome/3/garden/lights/set", "ON")
        _ = try await home.device.waitFor { $0.topic == "cmnd/garden_plug/POWER" }
        let event = try await home.watcher.waitFor { $0.topic == "smarthome/3/events" && $0.text.contains("device_timeout") }
        #expect(event.text.contains("\"command_rejected\""))
        #expect(home.watcher.last("smarthome/3/garden/lights") != "ON")
        // The API says 504 and changes nothing.
        let token = try await APITests.token(home.bridge.httpPort, "Devon", "12345")
        let reply = try await HTTP.send(home.bridge.httpPort, "/api/v1/rooms/garden/lights", method: "POST",
                                        body: Data(#"{"state":"ON"}"#.utf8), token: token)
        #expect(reply.status == 504, "\(reply.text)")
        #expect(reply.text.contains("did not confirm"))
        // A state the device reports on its own (its button) is published like any change.
        try home.device.publish("stat/garden_plug/POWER", "ON")
        _ = try await home.watcher.waitFor("smarthome/3/garden/lights", payload: "ON")
    }

    @Test func aDeviceOfflineOrAStaleSensorMakesItsRoomUnavailable() async throws {
        let home = try await Home(extraUsers: Self.user("""
                  - name: Bedroom
                    sensors:
                      - { name: Temperature, zigbee2mqtt: { device: bed_climate }, expire_after: 2s }
                      - Humidity
                  - name: Garden
                    sensors:
                      - { name: Lights, tasmota: { topic: garden_plug } }
            """))
        let device = home.device
        try device.publish("zigbee2mqtt/bed_climate", #"{"temperature":20.0}"#)
        _ = try await home.watcher.waitFor("smarthome/3/bedroom/temperature", payload: "20.0")
        // Nothing for 2 s: stale, the room offline; a reading brings it back.
        _ = try await home.watcher.waitFor("smarthome/3/bedroom/availability", payload: "offline")
        try device.publish("zigbee2mqtt/bed_climate", #"{"temperature":20.5}"#)
        _ = try await home.watcher.waitFor("smarthome/3/bedroom/availability", payload: "online")
        // zigbee2mqtt 2.x availability (JSON) and 1.x (plain text) alike.
        try device.publish("zigbee2mqtt/bed_climate/availability", #"{"state":"offline"}"#, retain: true)
        _ = try await home.watcher.waitFor { $0.topic == "smarthome/3/bedroom/availability" && $0.text == "offline" }
        try device.publish("zigbee2mqtt/bed_climate/availability", "online", retain: true)
        _ = try await home.watcher.waitFor { $0.topic == "smarthome/3/bedroom/availability" && $0.text == "online" }
        // Tasmota's last will.
        try device.publish("tele/garden_plug/LWT", "Offline", retain: true)
        _ = try await home.watcher.waitFor("smarthome/3/garden/availability", payload: "offline")
    }

    @Test func badPayloadsAreIgnoredCountedAndLoggedOnceKeepingTheLastGoodValue() async throws {
        let home = try await Home()
        try home.device.publish("zigbee2mqtt/bed_climate", #"{"temperature":19.5,"humidity":40}"#)
        _ = try await home.watcher.waitFor("smarthome/3/bedroom/temperature", payload: "19.5")
        let bad: [String] = [
            "not json at all",
            String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000),
            #"{"humidity":41}"#,                       // no temperature: a problem for temperature only
            #"{"temperature":"warm","humidity":42}"#,
            #"{"temperature":"#, 
            "{\"temperature\":" + String(repeating: "9", count: 70_000) + "}",
            String(decoding: [0xff, 0xfe, 0x00, 0x01], as: UTF8.self),
        ]
        for payload in bad { try home.device.publish("zigbee2mqtt/bed_climate", payload) }
        // A good value after them shows they were all handled; the bridge is still there.
        try home.device.publish("zigbee2mqtt/bed_climate", #"{"temperature":19.5,"humidity":43}"#)
        _ = try await home.watcher.waitFor("smarthome/3/bedroom/humidity", payload: "43.0")
        #expect(home.watcher.messages.filter { $0.topic == "smarthome/3/bedroom/temperature" }.map(\.text) == ["19.5"])
        let metrics = try await HTTP.get(home.bridge.httpPort, "/metrics").text
        let line = metrics.split(separator: "\n").first {
            $0.hasPrefix(#"smarthome_device_payload_errors_total{user="3",room="bedroom",sensor="temperature"}"#)
        }
        let count = line.flatMap { Int($0.split(separator: " ").last ?? "") }
        #expect(count == bad.count, "\(line ?? "no line")")
        // One log line per sensor per change of problem, not one per message: twenty more of the same
        // kind add one line per sensor that reads the topic (temperature, humidity).
        let before = home.bridge.log.components(separatedBy: "ignored a device payload").count
        for _ in 0..<20 { try home.device.publish("zigbee2mqtt/bed_climate", "still not json") }
        try home.device.publish("zigbee2mqtt/bed_climate", #"{"temperature":19.5,"humidity":44}"#)
        _ = try await home.watcher.waitFor("smarthome/3/bedroom/humidity", payload: "44.0")
        let after = home.bridge.log.components(separatedBy: "ignored a device payload").count
        #expect(after - before == 2, "\(after - before) lines for twenty payloads of one problem")
        #expect(await HTTP.waitForStatus(home.bridge.httpPort, "/healthz", 200))
    }

    @Test func anHTTPDeviceIsPolledAndItsFailuresTakeTheRoomOffline() async throws {
        let served = Mutex<(status: Int, body: String)>((200, #"{"hum":{"value":57.5}}"#))
        let server = HTTPServer(configuration: HTTPServerConfiguration(port: 0, threadPoolSize: 2)) { _ in
            let (status, body) = served.withLock { $0 }
            return HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        }
        try server.start()
        defer { server.stop() }
        let home = try await Home(extraUsers: Self.user("""
                  - name: Cellar
                    sensors:
                      - { name: Humidity, http: { url: "http://127.0.0.1:\(server.port)/status", value: /hum/value, interval: 500ms } }
            """), settings: Self.settings().replacing("source:\n", with: "source:\n  failures_before_offline: 2\n"))
        _ = try await home.watcher.waitFor("smarthome/3/cellar/humidity", payload: "57.5")
        served.withLock { $0 = (500, "down") }
        _ = try await home.watcher.waitFor("smarthome/3/cellar/availability", payload: "offline")
        served.withLock { $0 = (200, #"{"hum":{"value":58.0}}"#) }
        _ = try await home.watcher.waitFor("smarthome/3/cellar/availability", payload: "online")
        _ = try await home.watcher.waitFor("smarthome/3/cellar/humidity", payload: "58.0")
    }

    @Test func rebindingKeepsHistoryAndTheHomeAssistantIdentity() async throws {
        let storage = try TestFiles.makeDirectory("rebind").appendingPathComponent("bridge.sqlite").path
        let first = Self.user("""
                  - name: Patio
                    sensors:
                      - { name: Temperature, zigbee2mqtt: { device: old_sensor } }
            """)
        var home: Home? = try await Home(extraUsers: first, storagePath: storage)
        try home!.device.publish("zigbee2mqtt/old_sensor", #"{"temperature":11.0}"#)
        _ = try await home!.watcher.waitFor("smarthome/3/patio/temperature", payload: "11.0")
        let oldConfig = try await home!.watcher.waitFor { $0.topic.hasSuffix("/smarthome_3_patio/temperature/config") }
        try await Task.sleep(for: .seconds(1.5))  // history is written once a second
        home!.bridge.signal(SIGTERM)
        _ = home!.bridge.waitForExit(timeout: 10)
        home = nil

        // The battery was changed: a new device, the same sensor.
        let second = first.replacing("old_sensor", with: "new_sensor")
        let rebound = try await Home(extraUsers: second, storagePath: storage)
        try rebound.device.publish("zigbee2mqtt/new_sensor", #"{"temperature":12.5}"#)
        _ = try await rebound.watcher.waitFor("smarthome/3/patio/temperature", payload: "12.5")
        try await Task.sleep(for: .seconds(1.5))
        let token = try await APITests.token(rebound.bridge.httpPort, "Devon", "12345")
        let history = try await HTTP.send(rebound.bridge.httpPort, "/api/v1/rooms/patio/history?sensor=temperature",
                                          method: "GET", token: token)
        let points = (try JSONSerialization.jsonObject(with: history.body) as? [String: Any])?["points"] as? [[String: String]]
        #expect(points?.compactMap { $0["v"] } == ["11.0", "12.5"], "\(history.text)")
        let newConfig = try await rebound.watcher.waitFor { $0.topic.hasSuffix("/smarthome_3_patio/temperature/config") }
        #expect(newConfig.topic == oldConfig.topic)
        let id = { (message: MQTTMessage) in
            (try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any])?["unique_id"] as? String
        }
        #expect(id(newConfig) == id(oldConfig) && id(oldConfig) == "smarthome_3_patio_temperature")
    }

    @Test func devicesOnABrokerOfTheirOwn() async throws {
        let devicesBroker = try await TestBroker()
        let settings = Self.settings() + "  mqtt:\n    url: \(devicesBroker.url)\n"
            + (devicesBroker.username.map { "    username: \"\($0)\"\n    password: \"\(devicesBroker.password ?? "")\"\n" } ?? "")
        let home = try await Home(extraUsers: Self.user("""
                  - name: Garden
                    sensors:
                      - { name: Temperature, tasmota: { topic: garden_plug } }
                      - { name: Lights, tasmota: { topic: garden_plug } }
            """), settings: settings)
        let device = try await TestSubscriber(broker: devicesBroker, subscribe: ["cmnd/#"], name: "plug")
        try device.publish("tele/garden_plug/SENSOR", #"{"DS18B20":{"Temperature":17.5},"TempUnit":"C"}"#)
        _ = try await home.watcher.waitFor("smarthome/3/garden/temperature", payload: "17.5")
        // The same payload on the bridge's broker is nobody's device.
        try home.device.publish("tele/garden_plug/SENSOR", #"{"DS18B20":{"Temperature":30.0},"TempUnit":"C"}"#)
        // Commands go to the devices' broker, and its answer confirms them.
        try home.watcher.publish("smarthome/3/garden/lights/set", "ON")
        _ = try await device.waitFor("cmnd/garden_plug/POWER", payload: "ON")
        try device.publish("stat/garden_plug/POWER", "ON")
        _ = try await home.watcher.waitFor("smarthome/3/garden/lights", payload: "ON")
        #expect(home.watcher.last("smarthome/3/garden/temperature") == "17.5")
        #expect(home.device.messages.isEmpty, "a command went to the bridge's broker")
    }

    /// A room with an HTTP device and an MQTT one is online only while both are.
    @Test func aRoomMixingHTTPAndMQTTDevicesIsOnlineOnlyWhileBothAre() async throws {
        let served = Mutex<Int>(200)
        let server = HTTPServer(configuration: HTTPServerConfiguration(port: 0, threadPoolSize: 2)) { _ in
            HTTPResponse(status: served.withLock { $0 }, body: Array(#"{"hum":{"value":50.0}}"#.utf8))
        }
        try server.start()
        defer { server.stop() }
        let home = try await Home(extraUsers: Self.user("""
                  - name: Cellar
                    sensors:
                      - { name: Humidity, http: { url: "http://127.0.0.1:\(server.port)/s", value: /hum/value, interval: 500ms } }
                      - { name: Temperature, mqtt: { topic: cellar/t, availability_topic: cellar/up } }
            """), settings: Self.settings().replacing("source:\n", with: "source:\n  failures_before_offline: 2\n"))
        _ = try await home.watcher.waitFor("smarthome/3/cellar/humidity", payload: "50.0")
        served.withLock { $0 = 500 }
        _ = try await home.watcher.waitFor("smarthome/3/cellar/availability", payload: "offline")
        // The MQTT device says it is there: the room stays offline while the HTTP one fails.
        home.watcher.clear()
        try home.device.publish("cellar/up", "offline")
        try home.device.publish("cellar/up", "online")
        try await Task.sleep(for: .milliseconds(800))
        #expect(home.watcher.last("smarthome/3/cellar/availability") != "online")
        served.withLock { $0 = 200 }
        _ = try await home.watcher.waitFor("smarthome/3/cellar/availability", payload: "online")
    }
}
