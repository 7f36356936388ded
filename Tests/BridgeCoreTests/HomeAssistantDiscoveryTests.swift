import Foundation
import Testing
@testable import BridgeCore

@Suite struct HomeAssistantDiscoveryTests {
    let discovery = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "smarthome"), version: "0.1.0",
                                           sourceKind: "simulated")
    let user = Fixtures.users[0]

    func payload(_ sensor: SensorKind, room: String = "Kitchen", using builder: HomeAssistantDiscovery? = nil)
        throws -> (topic: String, fields: [String: Any])
    {
        let config = (builder ?? discovery).config(user: user, room: user.room(named: room)!, sensor: sensor)
        let fields = try JSONSerialization.jsonObject(with: Data(config.payload.bytes)) as? [String: Any] ?? [:]
        return (config.topic, fields)
    }

    @Test func temperatureIsAMeasuredSensor() throws {
        let (topic, fields) = try payload(.temperature)
        #expect(topic == "homeassistant/sensor/smarthome_1_kitchen/temperature/config")
        #expect(fields["name"] as? String == "Temperature")
        #expect(fields["unique_id"] as? String == "smarthome_1_kitchen_temperature")
        #expect(fields["state_topic"] as? String == "smarthome/1/kitchen/temperature")
        #expect(fields["device_class"] as? String == "temperature")
        #expect(fields["unit_of_measurement"] as? String == "°C")
        #expect(fields["state_class"] as? String == "measurement")
        #expect(fields["command_topic"] == nil)
        let humidity = try payload(.humidity).fields
        #expect(humidity["device_class"] as? String == "humidity")
        #expect(humidity["unit_of_measurement"] as? String == "%")
        #expect(humidity["state_class"] as? String == "measurement")
    }

    @Test func movementAndGasAreBinarySensors() throws {
        let (topic, gas) = try payload(.gas)
        #expect(topic == "homeassistant/binary_sensor/smarthome_1_kitchen/gas/config")
        #expect(gas["device_class"] as? String == "gas")
        #expect(gas["payload_on"] as? String == "ON")
        #expect(gas["payload_off"] as? String == "OFF")
        #expect(gas["state_class"] == nil)
        let (motionTopic, motion) = try payload(.movement, room: "Garden")
        #expect(motionTopic == "homeassistant/binary_sensor/smarthome_1_garden/movement/config")
        #expect(motion["device_class"] as? String == "motion")
    }

    @Test func lightsAreCommandableLights() throws {
        let (topic, light) = try payload(.lights)
        #expect(topic == "homeassistant/light/smarthome_1_kitchen/lights/config")
        #expect(light["command_topic"] as? String == "smarthome/1/kitchen/lights/set")
        #expect(light["state_topic"] as? String == "smarthome/1/kitchen/lights")
        #expect(light["payload_on"] as? String == "ON")
        #expect(light["payload_off"] as? String == "OFF")
        #expect(light["optimistic"] as? Bool == false)
    }

    @Test func eachRoomIsADeviceBehindTheBridge() throws {
        let fields = try payload(.lights).fields
        let device = try #require(fields["device"] as? [String: Any])
        #expect(device["identifiers"] as? [String] == ["smarthome_1_kitchen"])
        #expect(device["name"] as? String == "Cemalettin Kitchen")
        #expect(device["suggested_area"] as? String == "Kitchen")
        #expect(device["manufacturer"] as? String == "SmartHomeBridge")
        #expect(device["model"] as? String == "simulated")
        #expect(device["sw_version"] as? String == "0.1.0")
        #expect(device["via_device"] as? String == "smarthome_bridge")
        #expect((fields["origin"] as? [String: Any])?["name"] as? String == "SmartHomeBridge")
        let availability = try #require(fields["availability"] as? [[String: Any]])
        #expect(availability.map { $0["topic"] as? String }
            == ["smarthome/bridge/state", "smarthome/1/kitchen/availability"])
        #expect(fields["availability_mode"] as? String == "all")
    }

    @Test func restRoomsAreARestModel() throws {
        let rest = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "smarthome"), version: "0.1.0",
                                          sourceKind: "rest")
        let fields = try payload(.temperature, using: rest).fields
        #expect((fields["device"] as? [String: Any])?["model"] as? String == "rest")
    }

    /// The keys current Home Assistant reads (README, "Home Assistant"): `default_entity_id` as
    /// `<component>.<unique_id>` and no `object_id`, which it stops honouring; every room entity
    /// follows the bridge's state and its room's availability, both required.
    @Test(arguments: [(SensorKind.temperature, "sensor"), (.humidity, "sensor"), (.lights, "light"),
                      (.gas, "binary_sensor"), (.movement, "binary_sensor"), (.named("CO2 level"), "sensor")])
    func currentDiscoveryKeysPerComponent(sensor: SensorKind, component: String) throws {
        let room = sensor == .movement ? "Garden" : "Kitchen"
        let (topic, fields) = try payload(sensor, room: room)
        let uniqueID = try #require(fields["unique_id"] as? String)
        #expect(topic.hasPrefix("homeassistant/\(component)/"))
        #expect(fields["object_id"] == nil)
        #expect(fields["default_entity_id"] as? String == "\(component).\(uniqueID)")
        #expect(uniqueID == "smarthome_1_\(room.lowercased())_\(sensor.id)")
        let availability = try #require(fields["availability"] as? [[String: Any]])
        #expect(availability.map { $0["topic"] as? String }
            == ["smarthome/bridge/state", "smarthome/1/\(room.lowercased())/availability"])
        #expect(fields["availability_mode"] as? String == "all")
        #expect(fields["payload_available"] as? String == "online")
        #expect(fields["payload_not_available"] as? String == "offline")
        #expect((fields["origin"] as? [String: Any])?["name"] as? String == "SmartHomeBridge")
    }

    @Test func noConfigCarriesObjectID() {
        let configs = discovery.configs(home: Fixtures.home())
        #expect(configs.allSatisfy { !$0.payload.serialized.contains("object_id") })
        #expect(configs.allSatisfy { $0.payload.serialized.contains("\"default_entity_id\":") })
    }

    @Test func theBridgeHasAConnectivitySensor() throws {
        let config = discovery.bridgeConfig
        #expect(config.topic == "homeassistant/binary_sensor/smarthome_bridge/connectivity/config")
        let fields = try JSONSerialization.jsonObject(with: Data(config.payload.bytes)) as? [String: Any] ?? [:]
        #expect(fields["device_class"] as? String == "connectivity")
        #expect(fields["state_topic"] as? String == "smarthome/bridge/state")
        #expect(fields["payload_on"] as? String == "online")
        #expect(fields["object_id"] == nil)
        #expect(fields["default_entity_id"] as? String == "binary_sensor.smarthome_bridge_connectivity")
        #expect((fields["device"] as? [String: Any])?["identifiers"] as? [String] == ["smarthome_bridge"])
    }

    @Test func everyEntityOnceAndIdsDifferPerBaseTopic() {
        let home = Fixtures.home()
        let configs = discovery.configs(home: home)
        #expect(configs.count == 1 + 2 * 4 + 16 * 4, "the bridge, each user's 3 events and every light, each room's sensors")
        #expect(Set(configs.map(\.topic)).count == configs.count)
        let other = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "flat/2"), version: "0.1.0",
                                           sourceKind: "simulated")
        let otherTopics = Set(other.configs(home: home).map(\.topic))
        #expect(otherTopics.isDisjoint(with: Set(configs.map(\.topic))))
        #expect(other.bridgeDeviceID == "flat_2_bridge")
        let prefixed = HomeAssistantDiscovery(prefix: "ha", topics: Topics(base: "smarthome"), version: "0.1.0",
                                              sourceKind: "simulated")
        #expect(prefixed.configs(home: home).allSatisfy { $0.topic.hasPrefix("ha/") })
        #expect(prefixed.statusTopic == "ha/status")
    }

    /// The sweep compares topics only; they must be exactly the configs' topics, a sensor an
    /// upstream reported beyond the configured ones included.
    @Test func configTopicsAreTheConfigsTopicsRoomByRoom() {
        var home = Fixtures.home()
        home.record(Reading(user: user.id, room: user.rooms[0].id, sensor: .named("CO2 level"), value: .text("410")),
                    at: Date())
        let configs = discovery.configs(home: home)
        #expect(configs.count == 1 + 2 * 4 + 16 * 4 + 1)
        #expect(discovery.configTopics(home: home) == Set(configs.map(\.topic)))
        let byRoom = home.users.flatMap { user in
            discovery.userConfigs(user: user) + user.rooms.flatMap { discovery.configs(user: user, room: $0, home: home) }
        }
        #expect([discovery.bridgeConfig] + byRoom == configs)
    }

    @Test func ownConfigsAreRecognised() {
        let own = discovery.config(user: user, room: user.rooms[0], sensor: .lights).payload.bytes
        #expect(discovery.isOwn(payload: own))
        #expect(discovery.isOwn(payload: discovery.bridgeConfig.payload.bytes))
        let other = HomeAssistantDiscovery(prefix: "homeassistant", topics: Topics(base: "smarthome_1"), version: "0",
                                           sourceKind: "simulated")
        #expect(!discovery.isOwn(payload: other.config(user: user, room: user.rooms[0], sensor: .lights).payload.bytes))
        #expect(!discovery.isOwn(payload: Array(#"{"unique_id":"zigbee2mqtt_0x1"}"#.utf8)))
    }

    /// Each user's events as `event` entities (README, "Home Assistant"): one per type, each
    /// passing on only its own type as `event_type`.
    @Test func eachEventTypeIsAnEventEntity() throws {
        let events = discovery.userConfigs(user: user).filter { $0.topic.hasPrefix("homeassistant/event/") }
        #expect(events.map(\.topic) == ["gas", "alarm", "command_rejected"].map {
            "homeassistant/event/smarthome_1_home/\($0)/config"
        })
        let gas = try #require(try JSONSerialization.jsonObject(with: Data(events[0].payload.bytes)) as? [String: Any])
        #expect(gas["state_topic"] as? String == "smarthome/1/events")
        #expect(gas["event_types"] as? [String] == ["gas"])
        #expect(gas["default_entity_id"] as? String == "event.smarthome_1_home_gas")
        #expect(gas["object_id"] == nil)
        #expect((gas["value_template"] as? String)?.contains("value_json.type == 'gas'") == true)
        #expect(gas["availability_topic"] as? String == "smarthome/bridge/state")
        #expect(((gas["device"] as? [String: Any])?["identifiers"] as? [String]) == ["smarthome_1_home"])
    }
}
