/// Home Assistant MQTT discovery (README, "Home Assistant"): one retained config per entity under
/// `<prefix>/<component>/<node_id>/<object_id>/config`, full key names (no abbreviations).
/// Each config names its entity id as `default_entity_id` (`<component>.<unique_id>`), the key
/// Home Assistant 2025.10 and later read; `object_id`, which they no longer honour, is not sent.
///
/// Ids derive from the base topic, so two bridges with different base topics on one broker never
/// collide, and stay the same across restarts so Home Assistant keeps each entity's history.
public struct HomeAssistantDiscovery: Sendable {
    public struct Config: Sendable, Equatable {
        public var topic: String
        public var payload: JSONValue
    }

    public var prefix: String
    public var topics: Topics
    public var version: String
    /// `simulated` or `rest`: the rooms' device model.
    public var sourceKind: String

    public init(prefix: String, topics: Topics, version: String, sourceKind: String) {
        self.prefix = prefix
        self.topics = topics
        self.version = version
        self.sourceKind = sourceKind
    }

    /// The base topic as an id: characters other than letters, digits, `_` and `-` become `_`.
    public var idPrefix: String {
        String(topics.base.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" })
    }

    /// The bridge's own device id, named as `via_device` by every room: how the bridge recognises
    /// its configs among everyone's.
    public var bridgeDeviceID: String { "\(idPrefix)_bridge" }

    /// Where Home Assistant announces itself (`online` after it starts).
    public var statusTopic: String { "\(prefix)/status" }

    /// The subscription that sees every retained discovery config on the broker.
    public var configFilter: String { "\(prefix)/+/+/+/config" }

    private var origin: JSONValue {
        .object([("name", .string("SmartHomeBridge")), ("sw_version", .string(version))])
    }

    /// Every config: the bridge's connectivity sensor, then for each user (of those `include`
    /// accepts) its own entities (`userConfigs`) and each sensor of each room. Builds them all at
    /// once: for a large home, publish room by room with `configs(user:room:home:)`.
    public func configs(home: Home, users include: (User) -> Bool = { _ in true }) -> [Config] {
        var configs = [bridgeConfig]
        for user in home.users where include(user) {
            configs += userConfigs(user: user)
            for room in user.rooms {
                configs += self.configs(user: user, room: room, home: home)
            }
        }
        return configs
    }

    /// The event types of the user's events topic that Home Assistant sees as `event` entities.
    public static let eventTypes = ["gas", "alarm", "command_rejected"]

    /// The entities of a user's home beside its rooms, on a device of their own (`<username>
    /// home`): an `event` per event type (README, "Home Assistant"), every light of the user as
    /// one `light` and each group as a `light` (README, "Groups").
    public func userConfigs(user: User) -> [Config] {
        var configs = Self.eventTypes.map { eventConfig(user: user, type: $0) }
        guard user.rooms.contains(where: { $0.sensors.contains(.lights) }) else { return configs }
        configs.append(groupLight(user: user, objectID: "lights", name: "All lights",
                                  state: topics.userLights(user: user.id), command: topics.userLightsSet(user: user.id)))
        for group in user.groups {
            configs.append(groupLight(user: user, objectID: "group_\(group.name)", name: "Group \(group.name)",
                                      state: topics.group(user: user.id, group: group.name),
                                      command: topics.groupSet(user: user.id, group: group.name)))
        }
        return configs
    }

    /// The node id of a user's own device: `<base>_<user>_home`.
    private func homeNode(user: User) -> String { "\(idPrefix)_\(user.id)_home" }

    /// The device of a user's own entities (groups, events).
    private func homeDevice(user: User) -> JSONValue {
        .object([
            ("identifiers", .strings([homeNode(user: user)])),
            ("name", .string("\(user.username) home")),
            ("manufacturer", .string("SmartHomeBridge")),
            ("model", .string("Home")),
            ("sw_version", .string(version)),
            ("via_device", .string(bridgeDeviceID)),
        ])
    }

    /// An `event` entity fed from `<base>/<user>/events`: the template passes on only the events
    /// of its own type, with `type` copied to the `event_type` Home Assistant wants, and renders
    /// nothing for the others, which Home Assistant then ignores without a warning.
    private func eventConfig(user: User, type: String) -> Config {
        let name = type == "command_rejected" ? "Command rejected" : type.prefix(1).uppercased() + type.dropFirst()
        return homeEntity(user: user, component: "event", objectID: type, name: name, members: [
            ("state_topic", .string(topics.events(user: user.id))),
            ("event_types", .strings([type])),
            ("value_template", .string(
                "{% if value_json.type == '\(type)' %}{{ dict(value_json, event_type=value_json.type) | tojson }}{% endif %}")),
        ])
    }

    /// An entity of a user's home device: its ids, `members`, and availability on the bridge only.
    private func homeEntity(user: User, component: String, objectID: String, name: String,
                            members: [(String, JSONValue)]) -> Config {
        let node = homeNode(user: user)
        let payload = JSONValue.object([
            ("name", .string(name)),
            ("unique_id", .string("\(node)_\(objectID)")),
            ("default_entity_id", .string("\(component).\(node)_\(objectID)")),
        ] + members + [
            ("availability_topic", .string(topics.bridgeState)),
            ("payload_available", .string("online")),
            ("payload_not_available", .string("offline")),
            ("device", homeDevice(user: user)),
            ("origin", origin),
        ])
        return Config(topic: "\(prefix)/\(component)/\(node)/\(objectID)/config", payload: payload)
    }

    /// A light that switches several rooms: unavailable only with the bridge (its rooms may each be
    /// reachable or not).
    private func groupLight(user: User, objectID: String, name: String, state: String, command: String) -> Config {
        homeEntity(user: user, component: "light", objectID: objectID, name: name, members: [
            ("state_topic", .string(state)),
            ("command_topic", .string(command)),
            ("payload_on", .string("ON")),
            ("payload_off", .string("OFF")),
            ("optimistic", .bool(false)),
        ])
    }

    /// The configs of one room's sensors.
    public func configs(user: User, room: Room, home: Home) -> [Config] {
        home.sensors(of: room, user: user.id).map { config(user: user, room: room, sensor: $0) }
    }

    /// The topic of every config `configs(home:)` builds, without building the configs.
    public func configTopics(home: Home) -> Set<String> {
        var topics: Set<String> = [bridgeConfig.topic]
        for user in home.users {
            topics.formUnion(userConfigs(user: user).map(\.topic))
            for room in user.rooms {
                for sensor in home.sensors(of: room, user: user.id) {
                    topics.insert(configTopic(user: user, room: room, sensor: sensor))
                }
            }
        }
        return topics
    }

    private func node(user: User, room: Room) -> String { "\(idPrefix)_\(user.id)_\(room.id)" }

    /// `<prefix>/<component>/<node_id>/<object_id>/config`.
    public func configTopic(user: User, room: Room, sensor: SensorKind) -> String {
        "\(prefix)/\(Self.component(of: sensor))/\(node(user: user, room: room))/\(sensor.id)/config"
    }

    static func component(of sensor: SensorKind) -> String {
        switch sensor {
        case .movement, .gas: "binary_sensor"
        case .lights: "light"
        default: "sensor"  // measured ones, and a generic upstream sensor: its text as it comes
        }
    }

    /// The bridge's own device, with a connectivity binary sensor on `<base>/bridge/state`.
    public var bridgeConfig: Config {
        let payload = JSONValue.object([
            ("name", .string("Connectivity")),
            ("unique_id", .string("\(bridgeDeviceID)_connectivity")),
            ("default_entity_id", .string("binary_sensor.\(bridgeDeviceID)_connectivity")),
            ("state_topic", .string(topics.bridgeState)),
            ("payload_on", .string("online")),
            ("payload_off", .string("offline")),
            ("device_class", .string("connectivity")),
            ("entity_category", .string("diagnostic")),
            ("device", .object([
                ("identifiers", .strings([bridgeDeviceID])),
                ("name", .string("SmartHomeBridge (\(topics.base))")),
                ("manufacturer", .string("SmartHomeBridge")),
                ("model", .string("Bridge")),
                ("sw_version", .string(version)),
            ])),
            ("origin", origin),
        ])
        return Config(topic: "\(prefix)/binary_sensor/\(bridgeDeviceID)/connectivity/config", payload: payload)
    }

    /// One sensor's config: its component, device class, unit and topics.
    public func config(user: User, room: Room, sensor: SensorKind) -> Config {
        let node = node(user: user, room: room)
        let stateTopic = topics.sensor(user: user.id, room: room.id, sensor: sensor)
        var members: [(String, JSONValue)] = [
            ("name", .string(sensor.displayName)),
            ("unique_id", .string("\(node)_\(sensor.id)")),
            ("default_entity_id", .string("\(Self.component(of: sensor)).\(node)_\(sensor.id)")),
            ("state_topic", .string(stateTopic)),
        ]
        switch sensor {
        case .temperature, .humidity:
            members += [
                ("device_class", .string(sensor.id)),
                ("unit_of_measurement", .string(sensor.unit ?? "")),
                ("state_class", .string("measurement")),
                ("suggested_display_precision", .integer(1)),
            ]
        case .movement, .gas:
            members += [
                ("device_class", .string(sensor == .movement ? "motion" : "gas")),
                ("payload_on", .string("ON")),
                ("payload_off", .string("OFF")),
            ]
        case .lights:
            members += [
                ("command_topic", .string(topics.lightsSet(user: user.id, room: room.id))),
                ("payload_on", .string("ON")),
                ("payload_off", .string("OFF")),
                ("optimistic", .bool(false)),
            ]
        default:
            break  // a generic upstream sensor: its text as it comes
        }
        // A bound sensor that stops reporting is unavailable after expire_after, as HA shows it.
        if let expireAfter = room.bindings[sensor]?.expireAfter {
            members.append(("expire_after", .integer(Int(expireAfter.rounded(.up)))))
        }
        members += roomAvailability(user: user, room: room)
        members += [
            ("device", .object([
                ("identifiers", .strings([node])),
                ("name", .string("\(user.username) \(room.name)")),
                ("suggested_area", .string(room.name)),
                ("manufacturer", .string("SmartHomeBridge")),
                ("model", .string(sourceKind)),
                ("sw_version", .string(version)),
                ("via_device", .string(bridgeDeviceID)),
            ])),
            ("origin", origin),
        ]
        return Config(topic: configTopic(user: user, room: room, sensor: sensor), payload: .object(members))
    }

    /// Every room entity follows the bridge's state and its room's availability (README, "Home
    /// Assistant"): unavailable when the bridge is offline or the room is (a failing upstream, a
    /// cluster instance that died).
    func roomAvailability(user: User, room: Room) -> [(String, JSONValue)] {
        [
            ("availability", .array([.object([("topic", .string(topics.bridgeState))]),
                                     .object([("topic", .string(topics.availability(user: user.id, room: room.id)))])])),
            ("availability_mode", .string("all")),
            ("payload_available", .string("online")),
            ("payload_not_available", .string("offline")),
        ]
    }

    /// Whether a retained config found on the broker was published by a bridge with this base
    /// topic (so it may be cleared when the bridge no longer has that entity).
    public func isOwn(payload: [UInt8]) -> Bool {
        let text = String(decoding: payload, as: UTF8.self)
        return text.contains("\"via_device\":\"\(bridgeDeviceID)\"")
            || text.contains("\"unique_id\":\"\(bridgeDeviceID)_connectivity\"")
    }
}
