/// Homie 5 (README, "Homie"): each user's home as a device `<prefix>/5/<base>-<user>`, one node per
/// room and one property per sensor, described by a retained `$description` built from the same
/// home as Home Assistant's discovery. The devices are children of one root device per bridge
/// instance, `<base>-bridge` (`<base>-bridge-<index>` in a cluster), whose `$state` is the last
/// will (`lost`) of the bridge's one Homie connection: Homie 5 lets a child's state follow its
/// root's, so one connection serves every user instead of one per device.
public struct HomieDevices: Sendable {
    public var prefix: String
    public var topics: Topics
    public var version: String
    /// Cluster: this instance's index, which names its root device; nil for a single instance.
    public var instance: Int?
    /// Device ids by user id, and back: computed once (a building may have thousands of users).
    private let deviceIDs: [String: String]
    private let usersByDevice: [String: String]

    public init(prefix: String, topics: Topics, version: String, users: [User], instance: Int? = nil) {
        self.prefix = prefix
        self.topics = topics
        self.version = version
        self.instance = instance
        let ids = users.map { ($0.id, Self.id("\(topics.base)-\($0.id)")) }
        deviceIDs = Dictionary(ids, uniquingKeysWith: { first, _ in first })
        usersByDevice = Dictionary(ids.map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// `homie.prefix` is the first topic level only (Homie 5 keeps `/5/` after it).
    public static func validatePrefix(_ prefix: String) -> String? {
        if let problem = Topics.validateBase(prefix) { return problem }
        if prefix.contains("/") { return "must be one topic level (no /): Homie 5 puts /5/ after it" }
        return nil
    }

    /// A Homie topic id (a-z, 0-9 and `-`, not starting or ending with `-`): upper case folded,
    /// anything else (`_`, `/`, `.`) becomes `-`.
    public static func id(_ text: String) -> String {
        var out = ""
        for scalar in text.lowercased().unicodeScalars {
            let allowed = ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar)
            if allowed { out.unicodeScalars.append(scalar) } else if !out.hasSuffix("-") { out += "-" }
        }
        while out.hasPrefix("-") { out.removeFirst() }
        while out.hasSuffix("-") { out.removeLast() }
        return out.isEmpty ? "x" : out
    }

    public var rootID: String { Self.id("\(topics.base)-bridge" + (instance.map { "-\($0)" } ?? "")) }

    public func deviceID(of user: User) -> String { deviceIDs[user.id] ?? Self.id("\(topics.base)-\(user.id)") }

    public func stateTopic(device: String) -> String { "\(prefix)/5/\(device)/$state" }
    public func descriptionTopic(device: String) -> String { "\(prefix)/5/\(device)/$description" }

    /// `<prefix>/5/<device>/<room>/<sensor>`: the sensor's value, retained.
    public func propertyTopic(user: User, room: String, sensor: SensorKind) -> String {
        "\(prefix)/5/\(deviceID(of: user))/\(Self.id(room))/\(Self.id(sensor.id))"
    }

    /// Where controllers switch lights: `<prefix>/5/+/+/lights/set`.
    public var setFilter: String { "\(prefix)/5/+/+/lights/set" }

    /// The user and room a `…/lights/set` topic names, or nil for any other topic or an unknown
    /// device or room.
    public func parseSet(_ topic: String, in home: Home) -> (user: User, room: Room)? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 6, levels[0] == prefix, levels[1] == "5", levels[4] == "lights", levels[5] == "set",
              let userID = usersByDevice[String(levels[2])], let user = home.user(id: userID),
              let room = user.rooms.first(where: { Self.id($0.id) == levels[3] })
        else { return nil }
        return (user, room)
    }

    /// A light command's Homie payload (`true`/`false`, case sensitive as Homie's booleans are).
    public static func command(_ payload: [UInt8]) -> Result<LightCommand, CommandRejection> {
        switch String(decoding: payload, as: UTF8.self) {
        case "true": .success(.on)
        case "false": .success(.off)
        case let other: .failure(.badPayload("Homie boolean must be true or false, got \(LightCommand.quoted(other))"))
        }
    }

    /// A value as a Homie payload: floats as published on MQTT, booleans `true`/`false`, text as it
    /// is (an empty text as the one byte 0, Homie's empty string).
    public static func payload(_ value: SensorValue) -> String {
        switch value {
        case .number: value.mqttPayload
        case .binary(let on): on ? "true" : "false"
        case .text(let text): text.isEmpty ? "\u{0}" : text
        }
    }

    /// One user's device description: a node per room, a property per sensor (a room's extra
    /// sensors an upstream reported included).
    public func description(of user: User, home: Home) -> JSONValue {
        let nodes: [(String, JSONValue)] = user.rooms.map { room in
            let properties: [(String, JSONValue)] = home.sensors(of: room, user: user.id).map { sensor in
                (Self.id(sensor.id), Self.property(sensor))
            }
            return (Self.id(room.id), .object([("name", .string(room.name)), ("type", .string("smarthome-room")),
                                               ("properties", .object(properties))]))
        }
        // `parent` may be left out when it is the root; some controllers (ebus-sdk's) then take the
        // device for a root of its own, so it is said.
        return document(name: "\(user.username) home", members: [("root", .string(rootID)), ("parent", .string(rootID)),
                                                               ("nodes", .object(nodes))])
    }

    /// The root device: no nodes, every user device of this instance as a child.
    public func rootDescription(users: [User]) -> JSONValue {
        document(name: "SmartHomeBridge (\(topics.base))", members: [("children", .strings(users.map(deviceID(of:))))])
    }

    private static func property(_ sensor: SensorKind) -> JSONValue {
        var members: [(String, JSONValue)] = [("name", .string(sensor.displayName))]
        switch sensor {
        case .temperature, .humidity:
            members += [("datatype", .string("float")), ("unit", .string(sensor.unit ?? ""))]
        case .lights:
            members += [("datatype", .string("boolean")), ("format", .string("off,on")), ("settable", .bool(true))]
        case .movement, .gas:
            members += [("datatype", .string("boolean")), ("format", .string("off,on"))]
        default:
            members += [("datatype", .string("string"))]
        }
        return .object(members)
    }

    /// `homie`, `version` (a hash of everything else, so it changes exactly when the document
    /// does), `name`, `type` and `members`.
    private func document(name: String, members: [(String, JSONValue)]) -> JSONValue {
        let body = JSONValue.object([("name", .string(name)), ("type", .string("smarthome-bridge"))] + members)
        var hash: UInt32 = 2_166_136_261  // FNV-1a
        for byte in body.bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return .object([("homie", .string("5.0")), ("version", .integer(Int(hash)))]
            + [("name", .string(name)), ("type", .string("smarthome-bridge"))] + members)
    }
}
