/// The original backend's JSON shapes (README, "HTTP"), which the iPhone app decodes.
public enum SeedShapes {
    /// `{"userID":"1","rooms":["livingroom",...]}`: a successful legacy login.
    public static func login(_ user: User) -> JSONValue {
        .object([("userID", .string(user.id)), ("rooms", .strings(user.rooms.map(\.id)))])
    }

    /// `{"userID":"0"}`: the original's answer to a wrong name or password.
    public static let loginFailed: JSONValue = .object([("userID", .string("0"))])

    /// `{"rooms":["Livingroom",...],"roomsicon":["livingroom",...]}`.
    public static func rooms(_ user: User) -> JSONValue {
        .object([("rooms", .strings(user.rooms.map(\.name))), ("roomsicon", .strings(user.rooms.map(\.id)))])
    }

    /// `{"SensorNames":[...],"SensorIcon":[...],"SensorValues":[...]}` for one room; `extra` members follow.
    public static func room(_ room: Room, user: String, in home: Home, extra: [(String, JSONValue)] = []) -> JSONValue {
        // Served on every seed-route request and published with every reading: one lookup of the
        // room's values, and the JSON arrays built directly.
        let values = home.values(in: RoomKey(user: user, room: room.id))
        let sensors = home.sensors(of: room, user: user)
        var names: [JSONValue] = []
        var icons: [JSONValue] = []
        var texts: [JSONValue] = []
        names.reserveCapacity(sensors.count)
        icons.reserveCapacity(sensors.count)
        texts.reserveCapacity(sensors.count)
        for sensor in sensors {
            let value = values[sensor]
                ?? (sensor.isNumeric ? .number(0) : sensor.seedWords == nil ? .text("") : .binary(false))
            let text = value.seedText(for: sensor)
            names.append(.string(sensor.displayName))
            icons.append(.string(value.seedIcon(for: sensor)))
            texts.append(.string(text))
        }
        var members: [(String, JSONValue)] = [("SensorNames", .array(names)), ("SensorIcon", .array(icons)),
                                              ("SensorValues", .array(texts))]
        // Rooms with real devices say when each sensor was last heard from (null: not yet).
        if !room.bindings.isEmpty {
            let key = RoomKey(user: user, room: room.id)
            members.append(("SensorLastSeen", .array(sensors.map { sensor in
                home.lastSeen(sensor, in: key).map { .string(Timestamp.iso8601($0)) } ?? .null
            })))
        }
        return .object(members + extra)
    }

    /// `{"error":{"message":"..."}}`: every error answer.
    public static func error(_ message: String) -> JSONValue {
        .object([("error", .object([("message", .string(message))]))])
    }
}
