import Foundation

/// Identifies one room of one user.
public struct RoomKey: Hashable, Sendable {
    public var user: String
    public var room: String

    public init(user: String, room: String) {
        self.user = user
        self.room = room
    }
}

/// One sensor value of one room.
public struct Reading: Sendable, Equatable {
    public var user: String
    public var room: String
    public var sensor: SensorKind
    public var value: SensorValue

    public init(user: String, room: String, sensor: SensorKind, value: SensorValue) {
        self.user = user
        self.room = room
        self.sensor = sensor
        self.value = value
    }
}

/// The configured users and rooms with every sensor's current value: the state the bridge
/// publishes over MQTT and serves over HTTP.
public struct Home: Sendable {
    /// Every field, behind one reference: the HTTP server's threads each take a copy of the home per
    /// request (`HomeStore`), which is then one retain of one object rather than one of every
    /// dictionary, all shared by those threads (docs/performance.md, "Prepared responses").
    private var storage = Storage()

    /// `@unchecked Sendable` because its fields are `var`s. It is safe because a `Storage` is changed
    /// only through `Home`'s accessors below, which first copy it unless this home holds the only
    /// reference (`isKnownUniquelyReferenced`): one shared between homes, and so between threads,
    /// is never changed.
    private final class Storage: @unchecked Sendable {
        var users: [User] = []
        var values: [RoomKey: [SensorKind: SensorValue]] = [:]
        var updated: [RoomKey: Date] = [:]
        var seen: [RoomKey: [SensorKind: Date]] = [:]
        var revisions: [RoomKey: RoomRevision] = [:]
        var extraSensors: [RoomKey: [SensorKind]] = [:]
        var indexByID: [String: Int] = [:]
        var indexByUsername: [String: Int] = [:]

        init() {}

        init(copying other: Storage) {
            users = other.users
            values = other.values
            updated = other.updated
            seen = other.seen
            revisions = other.revisions
            extraSensors = other.extraSensors
            indexByID = other.indexByID
            indexByUsername = other.indexByUsername
        }
    }

    private mutating func uniqueStorage() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(copying: storage) }
        return storage
    }

    public private(set) var users: [User] {
        get { storage.users }
        _modify { yield &uniqueStorage().users }
    }
    private var values: [RoomKey: [SensorKind: SensorValue]] {
        get { storage.values }
        _modify { yield &uniqueStorage().values }
    }
    private var updated: [RoomKey: Date] {
        get { storage.updated }
        _modify { yield &uniqueStorage().updated }
    }
    /// When each sensor last reported, changed or not (README, "Prometheus").
    private var seen: [RoomKey: [SensorKind: Date]] {
        get { storage.seen }
        _modify { yield &uniqueStorage().seen }
    }
    /// How often each room's values changed, with the room's documents for that revision
    /// (`RoomDocuments`). Every room has one from the moment it is in the home.
    private var revisions: [RoomKey: RoomRevision] {
        get { storage.revisions }
        _modify { yield &uniqueStorage().revisions }
    }
    /// Sensors a room reported beyond its configured ones (an upstream's generic sensors), in the
    /// order first seen.
    private var extraSensors: [RoomKey: [SensorKind]] {
        get { storage.extraSensors }
        _modify { yield &uniqueStorage().extraSensors }
    }

    /// Position of each user in `users` by id and by username: every reading, command and request
    /// looks a user up, and a building can have thousands.
    private var indexByID: [String: Int] {
        get { storage.indexByID }
        _modify { yield &uniqueStorage().indexByID }
    }
    private var indexByUsername: [String: Int] {
        get { storage.indexByUsername }
        _modify { yield &uniqueStorage().indexByUsername }
    }

    public init(users: [User]) {
        setUsers(users)
    }

    /// Replaces the users and their rooms (README, "Managing the home": rooms changed through the
    /// API, a request or a reload; users an admin added, changed or removed): values of rooms and
    /// sensors that remain are kept, those of rooms that went are dropped, and every room that
    /// changed gets a new revision, so its cached document is made again.
    public mutating func setUsers(_ users: [User]) {
        let oldRooms = Dictionary(self.users.flatMap { user in user.rooms.map { (RoomKey(user: user.id, room: $0.id), $0) } },
                                  uniquingKeysWith: { first, _ in first })
        let previous = self
        self.users = users
        // The first of duplicates wins, as a linear search would (the config loader refuses them).
        indexByID = Dictionary(users.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
        indexByUsername = Dictionary(users.enumerated().map { ($1.username, $0) }, uniquingKeysWith: { first, _ in first })
        values = [:]
        seen = [:]
        updated = [:]
        extraSensors = [:]
        revisions = [:]
        for user in users {
            for room in user.rooms {
                let key = RoomKey(user: user.id, room: room.id)
                guard let before = oldRooms[key] else {
                    // A new room, or one made again with the id of one that went: its own documents.
                    revisions[key] = RoomRevision(0)
                    continue
                }
                let sensors = Set(room.sensors)
                // Generic sensors an upstream reported stay; configured ones the room no longer has go.
                let dropped = Set(before.sensors).subtracting(sensors)
                values[key] = previous.values[key]?.filter { !dropped.contains($0.key) }
                seen[key] = previous.seen[key]?.filter { !dropped.contains($0.key) }
                updated[key] = previous.updated[key]
                extraSensors[key] = previous.extraSensors[key]?.filter { !sensors.contains($0) && !dropped.contains($0) }
                let kept = previous.revisions[key] ?? RoomRevision(0)
                revisions[key] = before == room ? kept : kept.next()
            }
        }
    }

    public func user(id: String) -> User? {
        indexByID[id].map { users[$0] }
    }

    /// `user(id:) != nil` without copying the user out.
    public func hasUser(id: String) -> Bool {
        indexByID[id] != nil
    }

    /// `user(id:)?.room(named:)` without copying the user out first (the room route asks on every request).
    public func room(ofUser id: String, named name: String) -> Room? {
        withRoom(ofUser: id, named: name) { $0 }
    }

    /// `body` given the room `room(ofUser:named:)` finds, read where it is: neither the user nor the room
    /// is copied out (a copy retains each of its fields, which every server thread shares). Nil when there
    /// is no such room.
    public func withRoom<Result>(ofUser id: String, named name: String, _ body: (Room) -> Result) -> Result? {
        guard let index = indexByID[id] else { return nil }
        return storage.users.withUnsafeBufferPointer { users in
            users[index].rooms.withUnsafeBufferPointer { rooms in
                User.roomIndex(named: name, in: rooms).map { body(rooms[$0]) }
            }
        }
    }

    /// Usernames match exactly, as the original backend did.
    public func user(username: String) -> User? {
        indexByUsername[username].map { users[$0] }
    }

    public func value(of sensor: SensorKind, in key: RoomKey) -> SensorValue? {
        values[key]?[sensor]
    }

    /// Every current value of a room.
    public func values(in key: RoomKey) -> [SensorKind: SensorValue] {
        values[key] ?? [:]
    }

    /// When a value of the room last changed.
    public func updatedAt(_ key: RoomKey) -> Date? {
        updated[key]
    }

    /// When the sensor's last reading came, whether it changed the value or not; `nil` before the first.
    public func lastSeen(_ sensor: SensorKind, in key: RoomKey) -> Date? {
        seen[key]?[sensor]
    }

    /// A number that changes whenever a value of the room does (0 before the first).
    public func revision(of key: RoomKey) -> Int {
        revisions[key]?.number ?? 0
    }

    /// The room's current revision, where its documents are kept once made; nil for a room the home
    /// does not have.
    public func currentRevision(of key: RoomKey) -> RoomRevision? {
        revisions[key]
    }

    /// The room's sensors: the configured ones, then any others it has reported.
    public func sensors(of room: Room, user: String) -> [SensorKind] {
        room.sensors + (extraSensors[RoomKey(user: user, room: room.id)] ?? [])
    }

    /// Stores a reading; returns whether the value changed. A sensor the room was not configured
    /// with is added to it.
    @discardableResult
    public mutating func record(_ reading: Reading, at time: Date) -> Bool {
        let key = RoomKey(user: reading.user, room: reading.room)
        seen[key, default: [:]][reading.sensor] = time
        let old = values[key]?[reading.sensor]
        let room = user(id: reading.user)?.rooms.first(where: { $0.id == reading.room })
        if let room, !room.bindings.isEmpty {
            // A room with devices carries each sensor's last-seen time: its document changes with
            // every reading.
            bumpRevision(key)
        }
        guard old != reading.value else { return false }
        if old == nil, let room, !room.sensors.contains(reading.sensor),
           !(extraSensors[key] ?? []).contains(reading.sensor) {
            extraSensors[key, default: []].append(reading.sensor)
        }
        values[key, default: [:]][reading.sensor] = reading.value
        updated[key] = time
        bumpRevision(key)
        return true
    }

    private mutating func bumpRevision(_ key: RoomKey) {
        revisions[key] = revisions[key]?.next() ?? RoomRevision(1)
    }

    /// Resolves a command's target; the sensor must be a light the room has.
    public func commandTarget(user userID: String, room roomID: String, sensor: String = "lights")
        -> Result<(User, Room), CommandRejection>
    {
        guard let user = user(id: userID) else { return .failure(.unknownUser(userID)) }
        guard let room = user.room(named: roomID) else {
            return .failure(.unknownRoom(user: userID, room: roomID))
        }
        guard sensor == SensorKind.lights.id else { return .failure(.notALight(sensor: sensor)) }
        guard room.sensors.contains(.lights) else { return .failure(.noLights(room: room.id)) }
        return .success((user, room))
    }

    /// The rooms a group command switches: the group's (`group` nil: every room of the user with
    /// lights), in the config's order.
    public func groupTarget(user userID: String, group: String?) -> Result<(User, [Room]), CommandRejection> {
        guard let user = user(id: userID) else { return .failure(.unknownUser(userID)) }
        guard let group else {
            let rooms = user.rooms.filter { $0.sensors.contains(.lights) }
            return rooms.isEmpty ? .failure(.noLights(room: "*")) : .success((user, rooms))
        }
        guard let found = user.group(named: group) else { return .failure(.unknownGroup(user: userID, group: group)) }
        return .success((user, found.rooms.compactMap { id in user.rooms.first { $0.id == id } }))
    }

    /// Whether every one of `rooms`' lights is on (README, "Groups": a group is `ON` only then).
    public func allLightsOn(user: String, rooms: [Room]) -> Bool {
        !rooms.isEmpty && rooms.allSatisfy { value(of: .lights, in: RoomKey(user: user, room: $0.id)) == .binary(true) }
    }

    /// Applies a light command; returns the new reading when the target is valid.
    public mutating func apply(_ command: LightCommand, user userID: String, room roomID: String, at time: Date)
        -> Result<Reading, CommandRejection>
    {
        switch commandTarget(user: userID, room: roomID) {
        case .failure(let rejection):
            return .failure(rejection)
        case .success(let (user, room)):
            let key = RoomKey(user: user.id, room: room.id)
            let current: Bool
            if case .binary(let on)? = value(of: .lights, in: key) { current = on } else { current = false }
            let reading = Reading(user: user.id, room: room.id, sensor: .lights, value: .binary(command.applied(to: current)))
            record(reading, at: time)
            return .success(reading)
        }
    }
}
