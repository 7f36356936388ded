/// The original backend's JSON shapes (contract section 3), which the iPhone app decodes.
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
        let key = RoomKey(user: user, room: room.id)
        var names: [String] = []
        var icons: [String] = []
        var texts: [String] = []
        for sensor in home.sensors(of: room, user: user) {
            let value = home.value(of: sensor, in: key)
                ?? (sensor.isNumeric ? .number(0) : sensor.seedWords == nil ? .text("") : .binary(false))
            names.append(sensor.displayName)
            icons.append(value.seedIcon(for: sensor))
            texts.append(value.seedText(for: sensor))
        }
        return .object(
            [("SensorNames", .strings(names)), ("SensorIcon", .strings(icons)), ("SensorValues", .strings(texts))]
                + extra
        )
    }

    /// `{"error":{"message":"..."}}`: every error answer.
    public static func error(_ message: String) -> JSONValue {
        .object([("error", .object([("message", .string(message))]))])
    }
}
