/// A room as configured: its display name, its id and its sensors in display order.
public struct Room: Sendable, Equatable {
    /// The lower-case id used in topics and as the icon name (`kitchen`).
    public var id: String
    /// The display name the seed routes show (`Kitchen`).
    public var name: String
    public var sensors: [SensorKind]

    public init(id: String, name: String, sensors: [SensorKind]) {
        self.id = id
        self.name = name
        self.sensors = sensors
    }

    /// The original backend's sensor sets: Kitchen and Bathroom have a gas sensor, every other room
    /// a movement sensor.
    public static func defaultSensors(forRoomNamed name: String) -> [SensorKind] {
        switch name.lowercased() {
        case "kitchen", "bathroom": [.temperature, .humidity, .lights, .gas]
        default: [.temperature, .humidity, .lights, .movement]
        }
    }
}

/// A user of the bridge: the account that the seed routes and the API serve.
public struct User: Sendable, Equatable {
    public var id: String
    public var username: String
    /// An argon2id hash in libsodium's string format; never the password itself.
    public var passwordHash: String
    public var rooms: [Room]
    /// Where the user's notifications go (`users[].notify`, README "Notifications").
    public var notify: [NotifyTarget]

    public init(id: String, username: String, passwordHash: String, rooms: [Room], notify: [NotifyTarget] = []) {
        self.id = id
        self.username = username
        self.passwordHash = passwordHash
        self.rooms = rooms
        self.notify = notify
    }

    /// Finds one of the user's rooms by id or display name, in any case.
    public func room(named nameOrID: String) -> Room? {
        let key = nameOrID.lowercased()
        return rooms.first { $0.id == key || $0.name.lowercased() == key }
    }
}
