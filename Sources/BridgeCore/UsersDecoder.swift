/// Decodes the `users` list of the config file:
///
/// ```yaml
/// users:
///   - id: "1"
///     username: Cemalettin
///     password_hash: "$argon2id$..."
///     rooms:
///       - Livingroom                       # sensors by the original's rule
///       - { name: Kitchen, sensors: [Temperature, Humidity, Lights, Gas] }
///     groups:
///       - { name: downstairs, rooms: [Kitchen, Livingroom] }
/// ```
enum UsersDecoder {
    /// Ids become topic levels, so they are restricted to characters that need no escaping anywhere.
    static let idCharacters = Set("abcdefghijklmnopqrstuvwxyz0123456789_-")
    /// Topic levels the bridge uses itself: a user or room by these names would collide with them.
    static let reservedUserIDs: Set<String> = ["bridge"]
    static let reservedRoomIDs: Set<String> = ["events", "lights", "groups"]
    /// Groups one user may have at most (README, "Groups"): each is a subscription-free topic and a
    /// Home Assistant entity, so their number is bounded like everything else.
    static let maxGroups = 64

    static func decode(_ node: ConfigNode?, issues: inout [ConfigIssue]) -> [User] {
        guard let node else {
            issues.append(ConfigIssue(path: "users", message: "is required: at least one user with rooms"))
            return []
        }
        guard case .sequence(let items, _) = node, !items.isEmpty else {
            issues.append(ConfigIssue(path: "users", message: "must be a non-empty list of users", line: node.line))
            return []
        }
        var users: [User] = []
        // Ids and usernames are compared even for users with other problems, so that one run of
        // check-config lists a duplicate beside, say, an unknown sensor of the same user.
        var ids: Set<String> = []
        var usernames: Set<String> = []
        for (index, item) in items.enumerated() {
            let decoded = decodeUser(item, path: "users[\(index)]", issues: &issues)
            var unique = true
            if let id = decoded.id, !ids.insert(id).inserted {
                issues.append(ConfigIssue(path: "users[\(index)].id", message: "\"\(id)\" is used by another user",
                                          line: item.line))
                unique = false
            }
            if let username = decoded.username, !usernames.insert(username).inserted {
                issues.append(ConfigIssue(path: "users[\(index)].username",
                                          message: "\"\(username)\" is used by another user", line: item.line))
                unique = false
            }
            if unique, let user = decoded.user { users.append(user) }
        }
        return users
    }

    static func members(
        of node: ConfigNode, path: String, allowed: [String], issues: inout [ConfigIssue]
    ) -> [String: ConfigNode]? {
        guard case .mapping(let pairs, _) = node else {
            issues.append(ConfigIssue(path: path, message: "must be a mapping with \(allowed.joined(separator: ", "))",
                                      line: node.line))
            return nil
        }
        var result: [String: ConfigNode] = [:]
        for (key, value) in pairs {
            if !allowed.contains(key) {
                issues.append(ConfigIssue(path: "\(path).\(key)", message: "is not a known key", line: value.line))
            } else if result[key] != nil {
                issues.append(ConfigIssue(path: "\(path).\(key)", message: "is set twice", line: value.line))
            } else {
                result[key] = value
            }
        }
        return result
    }

    static func text(_ node: ConfigNode?, path: String, parentLine: Int, issues: inout [ConfigIssue]) -> String? {
        switch node {
        case .scalar(let value, _, let line)?:
            if value.isEmpty {
                issues.append(ConfigIssue(path: path, message: "must not be empty", line: line))
                return nil
            }
            return value
        case nil, .null?:
            issues.append(ConfigIssue(path: path, message: "is required", line: node?.line ?? parentLine))
            return nil
        case let other?:
            issues.append(ConfigIssue(path: path, message: "must be a single value", line: other.line))
            return nil
        }
    }

    /// `true` or `false` (YAML's other spellings of them too, as `ConfigValue.bool` reads them).
    static func flag(_ node: ConfigNode, path: String, issues: inout [ConfigIssue]) -> Bool {
        guard case .scalar(let value, _, let line) = node else {
            issues.append(ConfigIssue(path: path, message: "must be true or false", line: node.line))
            return false
        }
        switch value.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            issues.append(ConfigIssue(path: path, message: "must be true or false, got \"\(value)\"", line: line))
            return false
        }
    }

    private static func validID(_ id: String, path: String, reserved: Set<String>, line: Int,
                                issues: inout [ConfigIssue]) -> Bool {
        if !id.allSatisfy(idCharacters.contains) {
            issues.append(ConfigIssue(path: path, message: "\"\(id)\" may hold only a-z, 0-9, _ and - (it is a topic level)",
                                      line: line))
            return false
        }
        if reserved.contains(id) {
            issues.append(ConfigIssue(path: path, message: "\"\(id)\" is reserved for the bridge's own topics", line: line))
            return false
        }
        return true
    }

    /// The user, or `nil` when it has a problem; its id and username whenever they could be read.
    private static func decodeUser(_ node: ConfigNode, path: String, issues: inout [ConfigIssue])
        -> (user: User?, id: String?, username: String?)
    {
        guard let fields = members(of: node, path: path,
                                   allowed: ["id", "username", "password_hash", "rooms", "groups", "notify", "admin"],
                                   issues: &issues) else { return (nil, nil, nil) }
        let before = issues.count
        let id = text(fields["id"], path: "\(path).id", parentLine: node.line, issues: &issues)
        if let id { _ = validID(id, path: "\(path).id", reserved: reservedUserIDs, line: fields["id"]?.line ?? 0,
                                issues: &issues) }
        let username = text(fields["username"], path: "\(path).username", parentLine: node.line, issues: &issues)
        let hash = text(fields["password_hash"], path: "\(path).password_hash", parentLine: node.line, issues: &issues)
        if let hash, !hash.hasPrefix("$argon2id$") {
            issues.append(ConfigIssue(path: "\(path).password_hash",
                                      message: "must be an argon2id hash (make one with `smarthome-bridge hash-password`)",
                                      line: fields["password_hash"]?.line ?? 0))
        }
        let rooms = decodeRooms(fields["rooms"], path: "\(path).rooms", parentLine: node.line, issues: &issues)
        let groups = fields["groups"].map { decodeGroups($0, path: "\(path).groups", rooms: rooms, issues: &issues) } ?? []
        let notify = fields["notify"].map { decodeNotify($0, path: "\(path).notify", issues: &issues) } ?? []
        let isAdmin = fields["admin"].map { flag($0, path: "\(path).admin", issues: &issues) } ?? false
        guard issues.count == before, let id, let username, let hash else { return (nil, id, username) }
        return (User(id: id, username: username, passwordHash: hash, rooms: rooms, groups: groups, notify: notify,
                     isAdmin: isAdmin),
                id, username)
    }

    /// `groups: [{ name, rooms: [...] }]`: each name a topic level used once, each room one of the
    /// user's (by name or id, any case) with lights, listed once.
    private static func decodeGroups(_ node: ConfigNode, path: String, rooms: [Room],
                                     issues: inout [ConfigIssue]) -> [LightGroup] {
        guard case .sequence(let items, _) = node else {
            issues.append(ConfigIssue(path: path, message: "must be a list of groups { name, rooms }", line: node.line))
            return []
        }
        if items.count > maxGroups {
            issues.append(ConfigIssue(path: path, message: "has \(items.count) groups; at most \(maxGroups) are allowed",
                                      line: node.line))
            return []
        }
        var groups: [LightGroup] = []
        var names: Set<String> = []
        for (index, item) in items.enumerated() {
            let groupPath = "\(path)[\(index)]"
            guard let fields = members(of: item, path: groupPath, allowed: ["name", "rooms"], issues: &issues) else {
                continue
            }
            var name = text(fields["name"], path: "\(groupPath).name", parentLine: item.line, issues: &issues)
            if let given = name {
                if !validID(given, path: "\(groupPath).name", reserved: [], line: fields["name"]?.line ?? item.line,
                            issues: &issues) {
                    name = nil
                } else if !names.insert(given).inserted {
                    issues.append(ConfigIssue(path: "\(groupPath).name",
                                              message: "\"\(given)\" is used by another group of this user",
                                              line: fields["name"]?.line ?? item.line))
                    name = nil
                }
            }
            let members = decodeGroupRooms(fields["rooms"], path: "\(groupPath).rooms", parentLine: item.line,
                                           rooms: rooms, issues: &issues)
            if let name, let members { groups.append(LightGroup(name: name, rooms: members)) }
        }
        return groups
    }

    private static func decodeGroupRooms(_ node: ConfigNode?, path: String, parentLine: Int, rooms: [Room],
                                         issues: inout [ConfigIssue]) -> [String]? {
        guard case .sequence(let items, _)? = node, !items.isEmpty else {
            issues.append(ConfigIssue(path: path, message: "must be a non-empty list of this user's rooms",
                                      line: node?.line ?? parentLine))
            return nil
        }
        var ids: [String] = []
        var valid = true
        for (index, item) in items.enumerated() {
            let roomPath = "\(path)[\(index)]"
            guard let word = text(item, path: roomPath, parentLine: item.line, issues: &issues) else {
                valid = false
                continue
            }
            let key = word.lowercased()
            guard let room = rooms.first(where: { $0.id == key || $0.name.lowercased() == key }) else {
                let known = rooms.map(\.name).joined(separator: ", ")
                issues.append(ConfigIssue(path: roomPath, message: "\"\(word)\" is not a room of this user (\(known))",
                                          line: item.line))
                valid = false
                continue
            }
            if !room.sensors.contains(.lights) {
                issues.append(ConfigIssue(path: roomPath, message: "\"\(word)\" has no lights", line: item.line))
                valid = false
            } else if ids.contains(room.id) {
                issues.append(ConfigIssue(path: roomPath, message: "\"\(word)\" is listed twice", line: item.line))
                valid = false
            } else {
                ids.append(room.id)
            }
        }
        return valid ? ids : nil
    }

    private static func decodeRooms(_ node: ConfigNode?, path: String, parentLine: Int,
                                    issues: inout [ConfigIssue]) -> [Room] {
        guard case .sequence(let items, _)? = node, !items.isEmpty else {
            issues.append(ConfigIssue(path: path, message: "must be a non-empty list of rooms", line: node?.line ?? parentLine))
            return []
        }
        var rooms: [Room] = []
        var ids: Set<String> = []
        for (index, item) in items.enumerated() {
            let roomPath = "\(path)[\(index)]"
            let decoded = decodeRoom(item, path: roomPath, issues: &issues)
            if let id = decoded.id, !ids.insert(id).inserted {
                issues.append(ConfigIssue(path: "\(roomPath).id", message: "\"\(id)\" is used by another room of this user",
                                          line: item.line))
            } else if let room = decoded.room {
                rooms.append(room)
            }
        }
        return rooms
    }

    /// The room, or `nil` when it has a problem; its id whenever it could be read, so that duplicates
    /// are found beside other problems.
    static func decodeRoom(_ node: ConfigNode, path: String, issues: inout [ConfigIssue])
        -> (room: Room?, id: String?)
    {
        var name: String?
        var idNode: ConfigNode?
        var sensorsNode: ConfigNode?
        if case .scalar = node {
            name = text(node, path: "\(path)", parentLine: node.line, issues: &issues)
        } else {
            guard let fields = members(of: node, path: path, allowed: ["name", "id", "sensors"], issues: &issues) else {
                return (nil, nil)
            }
            name = text(fields["name"], path: "\(path).name", parentLine: node.line, issues: &issues)
            idNode = fields["id"]
            sensorsNode = fields["sensors"]
        }
        let sensors = sensorsNode.map { decodeSensors($0, path: "\(path).sensors", issues: &issues) }
        guard let name else { return (nil, nil) }
        let id: String
        if let idNode {
            guard let given = text(idNode, path: "\(path).id", parentLine: node.line, issues: &issues) else {
                return (nil, nil)
            }
            id = given
        } else {
            id = name.lowercased()
        }
        guard validID(id, path: idNode == nil ? "\(path).name" : "\(path).id", reserved: reservedRoomIDs,
                      line: (idNode ?? node).line, issues: &issues) else { return (nil, nil) }
        switch sensors {
        case nil: return (Room(id: id, name: name, sensors: Room.defaultSensors(forRoomNamed: name)), id)
        case let decoded??: return (Room(id: id, name: name, sensors: decoded.sensors, bindings: decoded.bindings), id)
        case .some(nil): return (nil, id)
        }
    }

    /// A room's sensor list, every entry checked; `nil` when any is wrong. An entry is a sensor's
    /// name, or a mapping with its binding to a device (`BindingDecoder`).
    private static func decodeSensors(_ node: ConfigNode, path: String, issues: inout [ConfigIssue])
        -> (sensors: [SensorKind], bindings: [SensorKind: BoundSensor])?
    {
        guard case .sequence(let items, _) = node, !items.isEmpty else {
            issues.append(ConfigIssue(path: path, message: "must be a non-empty list of sensor names", line: node.line))
            return nil
        }
        var sensors: [SensorKind] = []
        var bindings: [SensorKind: BoundSensor] = [:]
        var valid = true
        for (index, item) in items.enumerated() {
            let sensorPath = "\(path)[\(index)]"
            if case .mapping(let fields, let line) = item {
                guard let (kind, bound) = BindingDecoder.decode(fields, path: sensorPath, line: line, issues: &issues) else {
                    valid = false
                    continue
                }
                if sensors.contains(kind) {
                    issues.append(ConfigIssue(path: sensorPath, message: "\"\(kind.displayName)\" is listed twice",
                                              line: item.line))
                    valid = false
                    continue
                }
                sensors.append(kind)
                if let bound { bindings[kind] = bound }
                continue
            }
            guard let word = text(item, path: sensorPath, parentLine: item.line, issues: &issues) else {
                valid = false
                continue
            }
            guard let kind = SensorKind(name: word) else {
                let known = SensorKind.known.map(\.displayName).joined(separator: ", ")
                issues.append(ConfigIssue(path: sensorPath, message: "\"\(word)\" is not a known sensor (\(known))",
                                          line: item.line))
                valid = false
                continue
            }
            if sensors.contains(kind) {
                issues.append(ConfigIssue(path: sensorPath, message: "\"\(word)\" is listed twice", line: item.line))
                valid = false
                continue
            }
            sensors.append(kind)
        }
        return valid ? (sensors, bindings) : nil
    }
}
