import Foundation
import Testing
@testable import BridgeCore

/// Bindings in the config (README, "Connect your devices") and the payload mapping, without a broker.
@Suite struct DeviceBindingConfigTests {
    static func users(_ sensors: [Any]) -> [Any] {
        [["id": "1", "username": "u", "password_hash": "$argon2id$v=19$x",
          "rooms": [["name": "Garden", "sensors": sensors] as KeyValuePairs<String, Any>]] as KeyValuePairs<String, Any>]
    }

    static func load(_ sensors: [Any]) -> Result<BridgeConfiguration, ConfigIssues> {
        ConfigLoader.load(Fixtures.node(["users": users(sensors)] as KeyValuePairs<String, Any>), environment: [:])
    }

    @Test func aBindingIsDecodedWithItsOptions() throws {
        let config = try Self.load([
            ["name": "Temperature", "rtl_433": ["model": "Bresser-6in1", "id": "411042499"] as KeyValuePairs<String, Any>,
             "expire_after": "10m", "offset": "-0.5", "precision": "1"] as KeyValuePairs<String, Any>,
            "Gas",
        ]).get()
        let room = try #require(config.users.first?.rooms.first)
        #expect(room.sensors == [.temperature, .gas])
        let bound = try #require(room.bindings[.temperature])
        #expect(bound.binding == .rtl433(model: "Bresser-6in1", id: "411042499", channel: nil, field: nil))
        #expect(bound.expireAfter == 600)
        #expect(bound.offset == -0.5)
        #expect(bound.precision == 1)
        #expect(room.bindings[.gas] == nil)
    }

    nonisolated(unsafe) static let badEntries: [(KeyValuePairs<String, Any>, String, String)] = [
        (["name": "Temperature", "zigbee2mqtt": ["device": "a"] as KeyValuePairs<String, Any>,
          "tasmota": ["topic": "b"] as KeyValuePairs<String, Any>] as KeyValuePairs<String, Any>,
         "users[0].rooms[0].sensors[0]", "exactly one binding"),
        (["name": "Lights", "rtl_433": ["model": "m", "id": "1"] as KeyValuePairs<String, Any>] as KeyValuePairs<String, Any>,
         "users[0].rooms[0].sensors[0].rtl_433", "only receives"),
        (["name": "Temperature", "mqtt": ["topic": "t", "value": "temp"] as KeyValuePairs<String, Any>] as KeyValuePairs<String, Any>,
         "users[0].rooms[0].sensors[0].mqtt.value", "not a JSON pointer"),
        (["name": "Temperature", "mqtt": ["topic": "home/+/t"] as KeyValuePairs<String, Any>] as KeyValuePairs<String, Any>,
         "users[0].rooms[0].sensors[0].mqtt.topic", "without the wildcards"),
        (["name": "Temperature", "zigbee2mqtt": ["device": "a", "colour": "red"] as KeyValuePairs<String, Any>]
            as KeyValuePairs<String, Any>, "users[0].rooms[0].sensors[0].zigbee2mqtt.colour", "not a known key"),
        (["name": "Temperature", "expire_after": "5m"] as KeyValuePairs<String, Any>,
         "users[0].rooms[0].sensors[0].expire_after", "needs a binding"),
        (["name": "Lights", "mqtt": ["topic": "t"] as KeyValuePairs<String, Any>] as KeyValuePairs<String, Any>,
         "users[0].rooms[0].sensors[0].mqtt", "command_topic"),
    ]

    @Test(arguments: 0..<7)
    func aBadBindingNamesItsPath(index: Int) {
        let (entry, path, message) = Self.badEntries[index]
        guard case .failure(let problems) = Self.load([entry]) else {
            Issue.record("accepted")
            return
        }
        #expect(problems.issues.contains { $0.path == path && $0.message.contains(message) }, "\(problems.issues)")
    }
}

@Suite struct DevicePayloadTests {
    static func decode(_ payload: String, _ extractor: ValueExtractor, _ sensor: SensorKind,
                       _ configure: (inout BoundSensor) -> Void = { _ in }) -> DevicePayload.Outcome {
        var bound = BoundSensor(binding: .mqtt(MQTTBinding()))
        configure(&bound)
        return DevicePayload.decode(Array(payload.utf8), extractor: extractor, sensor: sensor, bound: bound)
    }

    @Test func numbersAreScaledOffsetConvertedAndRounded() {
        #expect(Self.decode(#"{"t":{"v":212}}"#, .pointer(JSONPointer("/t/v")!), .temperature) { $0.unit = "°F" }
            == .value(.number(100)))
        #expect(Self.decode("1234", .whole, .humidity) { $0.scale = 0.1; $0.offset = -3; $0.precision = 0 }
            == .value(.number(120)))
        #expect(Self.decode(#"{"model":"X","id":5,"temperature_F":50}"#,
                            .rtl433(model: "X", id: "5", channel: nil, field: nil), .temperature) == .value(.number(10)))
        #expect(Self.decode(#"{"model":"X","id":6,"temperature_C":1}"#,
                            .rtl433(model: "X", id: "5", channel: nil, field: nil), .temperature) == .notForThisSensor)
    }

    @Test func binaryWordsAreRead() {
        for (payload, on) in [("ON", true), ("off", false), ("true", true), ("0", false), ("Detected", true)] {
            #expect(Self.decode(payload, .whole, .movement) == .value(.binary(on)), "\(payload)")
        }
        #expect(Self.decode(#"{"occupancy":true}"#, .pointer(JSONPointer("/occupancy")!), .movement) == .value(.binary(true)))
        #expect(Self.decode("open-ish", .whole, .movement) == .problem(.notOnOff("open-ish")))
    }

    @Test func everyBadPayloadSaysWhatWasWrong() {
        let pointer = ValueExtractor.pointer(JSONPointer("/temperature")!)
        #expect(Self.decode("hello", pointer, .temperature) == .problem(.notJSON))
        #expect(Self.decode(String(repeating: "[", count: 100), pointer, .temperature) == .problem(.tooDeep))
        #expect(Self.decode("{}", pointer, .temperature) == .problem(.missing("/temperature")))
        #expect(Self.decode(#"{"temperature":"warm"}"#, pointer, .temperature) == .problem(.notANumber("warm")))
        #expect(Self.decode(#"{"temperature":true}"#, pointer, .temperature) == .problem(.notANumber("1")))
        let huge = "{\"temperature\":" + String(repeating: "1", count: DevicePayload.maxBytes) + "}"
        #expect(Self.decode(huge, pointer, .temperature) == .problem(.tooLarge(bytes: huge.utf8.count)))
        #expect(DevicePayload.decode([0xff, 0xfe], extractor: .whole, sensor: .temperature,
                                     bound: BoundSensor(binding: .mqtt(MQTTBinding()))) == .problem(.notText))
    }

    @Test func pointersFollowRFC6901() throws {
        let document = try JSONSerialization.jsonObject(with: Data(#"{"a/b":{"~k":[10,20]},"":1}"#.utf8))
        #expect(JSONPointer("/a~1b/~0k/1")?.resolve(in: document) as? Int == 20)
        #expect(JSONPointer("/")?.resolve(in: document) as? Int == 1)
        #expect(JSONPointer("/a~1b/~0k/01")?.resolve(in: document) == nil)
        #expect(JSONPointer("a") == nil)
        #expect(JSONPointer("/~2") == nil)
        #expect(JSONPointer("/a~1b/~0k")?.description == "/a~1b/~0k")
    }
}

extension DeviceBindingConfigTests {
    @Test func boundSensorsWithoutABrokerOfOneselfAreWarnedAbout() throws {
        let sensors: [Any] = [["name": "Temperature", "zigbee2mqtt": ["device": "a"] as KeyValuePairs<String, Any>]
            as KeyValuePairs<String, Any>]
        let embedded = try Self.load(sensors).get()
        #expect(embedded.warnings.contains { $0.contains("cannot publish to the embedded broker") })
        var own = embedded
        own.mqtt.url = BrokerURL(host: "127.0.0.1", port: 1883, tls: false)
        #expect(!own.warnings.contains { $0.contains("embedded broker") })
        let unbound = try Self.load(["Temperature"]).get()
        #expect(!unbound.warnings.contains { $0.contains("embedded broker") })
    }
}
