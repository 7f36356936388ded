/// A room made through the API or an MQTT request, as the database keeps it (README, "Managing the
/// home"): its sensor list in the config file's shapes, as JSON, so that loading it at start goes
/// through the same decoder as the file.
public struct ManagedRoom: Sendable, Equatable {
    public var user: String
    public var id: String
    public var name: String
    /// The sensor list as JSON (`["Temperature",{"name":"Lights","tasmota":{"topic":"lamp"}}]`).
    public var sensors: String

    public init(user: String, id: String, name: String, sensors: String) {
        self.user = user
        self.id = id
        self.name = name
        self.sensors = sensors
    }
}

/// Why a change of rooms was refused.
public enum RoomChangeFailure: Error, Sendable, Equatable {
    /// Every problem of the body, each with its JSON path: 400.
    case invalid([ConfigIssue])
    /// No such room of this user (another user's room looks the same): 404.
    case notFound
    /// The room is the config file's, its id is taken, a bound is reached: 409 with this message.
    case conflict(String)
    /// The bridge could not store the change (nothing was applied): 500.
    case failed(String)
}

/// The rules for rooms made while the bridge runs (README, "Managing the home"): the body is
/// decoded by the config file's own decoder (same checks, same messages, JSON paths instead of
/// key paths), then the rules only the API has: bounds, ids unique per user, the config file's
/// rooms left alone, and devices bound only where the user may read and publish.
public struct RoomRules: Sendable {
    /// Rooms one user may make through the API (the config file's are not counted).
    public static let maxRoomsPerUser = 50
    /// Sensors one room made through the API may have.
    public static let maxSensorsPerRoom = 32
    /// The longest room name, in bytes of UTF-8.
    public static let maxNameBytes = 128

    /// The config file, named in the answer for its rooms.
    public var configFile: String
    /// Each user's rooms that the config file defines, by id.
    public var fileRooms: [String: Set<String>]
    /// Topic prefixes only admins may bind devices under: the bridge's own, Home Assistant's and
    /// Homie's (another user's values and commands live there).
    public var reservedTopicPrefixes: [String]
    /// `devices.zigbee2mqtt.base_topic`, to resolve a binding's topics.
    public var zigbeeBase: String
    /// A cluster's instances each load the rooms at start; a room made on one would be unknown to
    /// the others, so rooms are the config file's only there.
    public var clustered = false

    public init(configFile: String, fileRooms: [String: Set<String>], reservedTopicPrefixes: [String],
                zigbeeBase: String, clustered: Bool = false) {
        self.configFile = configFile
        self.fileRooms = fileRooms
        self.reservedTopicPrefixes = reservedTopicPrefixes
        self.zigbeeBase = zigbeeBase
        self.clustered = clustered
    }

    /// The rules for `configuration`'s users as the file defines them.
    public init(configuration: BridgeConfiguration, configFile: String) {
        var prefixes = [configuration.mqtt.baseTopic, configuration.homeAssistant.prefix]
        if configuration.homie.enabled { prefixes.append(configuration.homie.prefix) }
        self.init(configFile: configFile,
                  fileRooms: Dictionary(configuration.users.map { ($0.id, Set($0.rooms.map(\.id))) },
                                        uniquingKeysWith: { first, _ in first }),
                  reservedTopicPrefixes: prefixes, zigbeeBase: configuration.devices.zigbeeBaseTopic,
                  clustered: configuration.cluster.instances > 1)
    }

    // MARK: Changes

    /// `POST /api/v1/rooms`: a new room of `user` (as the home has it now, managed rooms included).
    public func create(_ fields: [String: Any], user: User, managed: [ManagedRoom])
        -> Result<(ManagedRoom, Room), RoomChangeFailure>
    {
        if let refusal = clusterRefusal { return .failure(refusal) }
        if managed.filter({ $0.user == user.id }).count >= Self.maxRoomsPerUser {
            return .failure(.conflict("at most \(Self.maxRoomsPerUser) rooms per user may be made through the API; "
                + "delete one first"))
        }
        return decode(fields, user: user).flatMap { row, room in
            if let taken = user.rooms.first(where: { $0.id == room.id }) {
                let owner = isFileRoom(user: user.id, room: taken.id) ? " in \(configFile)" : ""
                return .failure(.conflict("room id \"\(room.id)\" is taken by the room \"\(taken.name)\"\(owner); "
                    + "give another name or an \"id\""))
            }
            return nameTaken(room, user: user).map { .failure($0) } ?? .success((row, room))
        }
    }

    /// Routes find a room by id or name, so two rooms of one user never share a name (in any case).
    private func nameTaken(_ room: Room, user: User) -> RoomChangeFailure? {
        let name = room.name.lowercased()
        guard let other = user.rooms.first(where: { $0.id != room.id && ($0.name.lowercased() == name || $0.id == name) })
        else { return nil }
        return .conflict("the name \"\(room.name)\" is taken by the room \"\(other.name)\" (id \"\(other.id)\")")
    }

    /// `PUT /api/v1/rooms/:room`: a new name, sensors or bindings; the id stays, and with it the
    /// topics and the history. A member left out keeps its current value.
    public func update(room nameOrID: String, _ fields: [String: Any], user: User, managed: [ManagedRoom])
        -> Result<(ManagedRoom, Room), RoomChangeFailure>
    {
        managedRoom(nameOrID, user: user, managed: managed).flatMap { row in
            var merged = fields
            if let id = fields["id"] {
                guard let given = id as? String, given == row.id else {
                    return .failure(.invalid([ConfigIssue(path: "id", message:
                        "cannot change: a room keeps its id \"\(row.id)\" (its topics and history); give a new \"name\"")]))
                }
            }
            merged["id"] = row.id
            if merged["name"] == nil { merged["name"] = row.name }
            if merged["sensors"] == nil { merged["sensors"] = RoomRules.parsedSensors(row.sensors) }
            return decode(merged, user: user).flatMap { row, room in
                nameTaken(room, user: user).map { .failure($0) } ?? .success((row, room))
            }
        }
    }

    /// `DELETE /api/v1/rooms/:room`.
    public func delete(room nameOrID: String, user: User, managed: [ManagedRoom]) -> Result<ManagedRoom, RoomChangeFailure> {
        managedRoom(nameOrID, user: user, managed: managed)
    }

    /// The `sensor/bind` request: one entry of the room's sensor list (a name, or a mapping with a
    /// binding) replaces the entry of the same sensor, or is added after the others.
    public func bind(room nameOrID: String, sensor entry: Any, user: User, managed: [ManagedRoom])
        -> Result<(ManagedRoom, Room), RoomChangeFailure>
    {
        managedRoom(nameOrID, user: user, managed: managed).flatMap { row in
            var sensors = RoomRules.parsedSensors(row.sensors) as? [Any] ?? []
            let kind = RoomRules.sensorID(of: entry)
            if let index = sensors.firstIndex(where: { RoomRules.sensorID(of: $0) == kind && kind != nil }) {
                sensors[index] = entry
            } else {
                sensors.append(entry)
            }
            return update(room: row.id, ["sensors": sensors], user: user, managed: managed)
        }
    }

    // MARK: Loading

    /// The config file's users with the rooms kept in the database after their own; a kept room
    /// that no longer fits (its user is gone, the file now has a room with its id, it no longer
    /// decodes) is left out with the reason, and stays in the database.
    public func merge(_ users: [User], rows: [ManagedRoom]) -> (users: [User], skipped: [(ManagedRoom, String)]) {
        var users = users
        var skipped: [(ManagedRoom, String)] = []
        for row in rows {
            guard let index = users.firstIndex(where: { $0.id == row.user }) else {
                skipped.append((row, "its user is not in \(configFile)"))
                continue
            }
            if users[index].rooms.contains(where: { $0.id == row.id }) {
                skipped.append((row, "\(configFile) has a room with this id"))
                continue
            }
            let fields: [String: Any] = ["id": row.id, "name": row.name, "sensors": RoomRules.parsedSensors(row.sensors)]
            switch decode(fields, user: users[index]) {
            case .success(let (_, room)): users[index].rooms.append(room)
            case .failure(.invalid(let issues)): skipped.append((row, issues.map(\.description).joined(separator: "; ")))
            case .failure(let other): skipped.append((row, "\(other)"))
            }
        }
        return (users, skipped)
    }

    // MARK: Decoding

    private var clusterRefusal: RoomChangeFailure? {
        clustered ? .conflict("rooms are managed in \(configFile) when cluster.instances is more than 1") : nil
    }

    private func isFileRoom(user: String, room: String) -> Bool {
        fileRooms[user]?.contains(room) == true
    }

    /// The user's room made through the API by id or name: the file's rooms answer 409, others 404.
    private func managedRoom(_ nameOrID: String, user: User, managed: [ManagedRoom]) -> Result<ManagedRoom, RoomChangeFailure> {
        if let refusal = clusterRefusal { return .failure(refusal) }
        guard let room = user.room(named: nameOrID) else { return .failure(.notFound) }
        if isFileRoom(user: user.id, room: room.id) {
            return .failure(.conflict("room \"\(room.name)\" is defined in \(configFile): change it there "
                + "(and reload), not through the API"))
        }
        guard let row = managed.first(where: { $0.user == user.id && $0.id == room.id }) else { return .failure(.notFound) }
        return .success(row)
    }

    /// The body through the config file's room decoder, then the API's own rules; every problem
    /// at once, each with its JSON path.
    func decode(_ fields: [String: Any], user: User) -> Result<(ManagedRoom, Room), RoomChangeFailure> {
        var issues: [ConfigIssue] = []
        let decoded = UsersDecoder.decodeRoom(ConfigNode.fromJSON(fields), path: "", issues: &issues).room
        // The decoder's paths start at a key path's dot: `.sensors[1].tasmota.topic`.
        issues = issues.map { issue in
            var issue = issue
            if issue.path.hasPrefix(".") { issue.path.removeFirst() }
            return issue
        }
        if let name = fields["name"] as? String {
            if name.utf8.count > Self.maxNameBytes {
                issues.append(ConfigIssue(path: "name", message: "is longer than \(Self.maxNameBytes) bytes of UTF-8"))
            } else if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                issues.append(ConfigIssue(path: "name", message: "must not contain control characters"))
            }
        }
        if let sensors = fields["sensors"] as? [Any], sensors.count > Self.maxSensorsPerRoom {
            issues.append(ConfigIssue(path: "sensors", message:
                "has \(sensors.count) sensors; a room made through the API has at most \(Self.maxSensorsPerRoom)"))
        }
        if let room = decoded, !user.isAdmin { issues += bindingIssues(room) }
        guard issues.isEmpty, let room = decoded else { return .failure(.invalid(issues)) }
        let sensors: JSONValue = fields["sensors"].map { ConfigNode.fromJSON($0).json }
            ?? .strings(room.sensors.map(\.displayName))
        return .success((ManagedRoom(user: user.id, id: room.id, name: room.name, sensors: sensors.serialized), room))
    }

    /// Bindings a user who is not an admin may not make: an HTTP device (the bridge would fetch
    /// whatever address is named, inside the network too) and topics under the bridge's own
    /// prefixes (another user's values and commands).
    private func bindingIssues(_ room: Room) -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        for (index, sensor) in room.sensors.enumerated() {
            guard let bound = room.bindings[sensor] else { continue }
            let path = "sensors[\(index)]"
            if case .http = bound.binding {
                issues.append(ConfigIssue(path: "\(path).http", message:
                    "only admins may bind a sensor to an HTTP device (the bridge would fetch any address named)"))
                continue
            }
            guard let topics = bound.topics(for: sensor, zigbeeBase: zigbeeBase) else { continue }
            let used = topics.reads.map(\.filter) + [topics.command?.topic, topics.availability?.topic].compactMap { $0 }
            for topic in used {
                guard let prefix = reservedTopicPrefixes.first(where: { RoomRules.filter(topic, reachesUnder: $0) })
                else { continue }
                issues.append(ConfigIssue(path: "\(path).\(bound.binding.key)", message:
                    "uses \"\(topic)\", under \"\(prefix)/\", which only admins may bind devices to"))
                break
            }
        }
        return issues
    }

    /// Whether `filter` (or a topic) matches any topic under `prefix/`: level by level, `+`
    /// matches any level and `#` everything after.
    public static func filter(_ filter: String, reachesUnder prefix: String) -> Bool {
        let levels = filter.split(separator: "/", omittingEmptySubsequences: false)
        let prefixLevels = prefix.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in prefixLevels.enumerated() {
            guard index < levels.count else { return false }
            if levels[index] == "#" { return true }
            if levels[index] != "+" && levels[index] != level { return false }
        }
        return levels.count > prefixLevels.count
    }

    static func parsedSensors(_ json: String) -> Any {
        APIBody.anyJSON(Array(json.utf8)) ?? []
    }

    /// The sensor an entry of a sensor list names (its `id`, else its name in lower case).
    static func sensorID(of entry: Any) -> String? {
        if let name = entry as? String { return SensorKind.named(name).id }
        guard let fields = entry as? [String: Any] else { return nil }
        if let id = fields["id"] as? String { return id }
        return (fields["name"] as? String).map { SensorKind.named($0).id }
    }
}
