/// A room as configured: its display name, its id and its sensors in display order.
public struct Room: Sendable, Equatable {
    /// The lower-case id used in topics and as the icon name (`kitchen`).
    public var id: String
    /// The display name the seed routes show (`Kitchen`).
    public var name: String
    public var sensors: [SensorKind]
    /// Sensors read from a real device (README, "Connect your devices"); the others come from
    /// `source.kind`.
    public var bindings: [SensorKind: BoundSensor]

    public init(id: String, name: String, sensors: [SensorKind], bindings: [SensorKind: BoundSensor] = [:]) {
        self.id = id
        self.name = name
        self.sensors = sensors
        self.bindings = bindings
    }

    /// Sensors that no binding claims: the default source's.
    public var unboundSensors: [SensorKind] { sensors.filter { bindings[$0] == nil } }

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
    /// Named sets of the user's rooms whose lights switch together (README, "Groups").
    public var groups: [LightGroup]
    /// Where the user's notifications go (`users[].notify`, README "Notifications").
    public var notify: [NotifyTarget]
    /// `users[].admin: true`: may manage users and see unbound devices, and may publish bridge
    /// requests over MQTT (README, "Managing the home").
    public var isAdmin: Bool

    public init(id: String, username: String, passwordHash: String, rooms: [Room], groups: [LightGroup] = [],
                notify: [NotifyTarget] = [], isAdmin: Bool = false) {
        self.id = id
        self.username = username
        self.passwordHash = passwordHash
        self.rooms = rooms
        self.groups = groups
        self.notify = notify
        self.isAdmin = isAdmin
    }

    /// One of the user's groups by its name (exactly: names are topic levels).
    public func group(named name: String) -> LightGroup? {
        groups.first { $0.name == name }
    }

    /// Finds one of the user's rooms by id or display name, in any case.
    public func room(named nameOrID: String) -> Room? {
        Self.room(named: nameOrID, in: rooms)
    }

    /// `room(named:)` of the user with these rooms, for a caller that has the rooms but not a copy of
    /// the user.
    static func room(named nameOrID: String, in rooms: [Room]) -> Room? {
        rooms.withUnsafeBufferPointer { rooms in roomIndex(named: nameOrID, in: rooms).map { rooms[$0] } }
    }

    /// Where `room(named:)` finds the room. Through the buffer: each room is read where it is (an array's
    /// subscript would copy each one out, a retain of each of its fields).
    static func roomIndex(named nameOrID: String, in rooms: UnsafeBufferPointer<Room>) -> Int? {
        let key = nameOrID.lowercased()
        // An id before any name (ids are lower case): a room named like another room's id never stands in
        // for that room, wherever it comes in the list (README, "HTTP").
        return rooms.firstIndex { $0.id == key } ?? rooms.firstIndex { Self.lowercases($0.name, to: key) }
    }

    /// `name.lowercased() == key`, without making the lower-case copy when `name` is ASCII (the room
    /// route asks on every request).
    private static func lowercases(_ name: String, to key: String) -> Bool {
        guard name.utf8.allSatisfy({ $0 < 0x80 }) else { return name.lowercased() == key }
        return name.utf8.count == key.utf8.count && zip(name.utf8, key.utf8).allSatisfy { byte, lowered in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == lowered
        }
    }
}

/// A named set of one user's rooms whose lights switch together (README, "Groups"):
/// `<base>/<user>/groups/<name>/set` switches them, `<base>/<user>/groups/<name>` says `ON` when
/// all of them are on.
public struct LightGroup: Sendable, Equatable {
    /// A topic level: a-z, 0-9, `_` and `-`.
    public var name: String
    /// The ids of the user's rooms in it, each with lights, in the config's order.
    public var rooms: [String]

    public init(name: String, rooms: [String]) {
        self.name = name
        self.rooms = rooms
    }
}
