/// The bridge's MQTT topic names under one base topic (README, "MQTT").
public struct Topics: Sendable, Equatable {
    public var base: String

    public init(base: String) {
        self.base = base
    }

    /// `<base>/<user>/<room>/<sensor>`: one reading, retained.
    public func sensor(user: String, room: String, sensor: SensorKind) -> String {
        "\(base)/\(user)/\(room)/\(sensor.id)"
    }

    /// `<base>/<user>/<room>`: the room's JSON in the seed shape, retained.
    public func room(user: String, room: String) -> String {
        "\(base)/\(user)/\(room)"
    }

    /// `<base>/<user>/<room>/lights/set`: light commands.
    public func lightsSet(user: String, room: String) -> String {
        "\(base)/\(user)/\(room)/lights/set"
    }

    /// `<base>/<user>/<room>/availability`: `online`/`offline` for polled rooms.
    public func availability(user: String, room: String) -> String {
        "\(base)/\(user)/\(room)/availability"
    }

    /// `<base>/<user>/lights`: `ON` when every light of the user is on, else `OFF`, retained
    /// (README, "Groups").
    public func userLights(user: String) -> String { "\(base)/\(user)/lights" }

    /// `<base>/<user>/lights/set`: switches every light of the user.
    public func userLightsSet(user: String) -> String { "\(base)/\(user)/lights/set" }

    /// `<base>/<user>/groups/<group>`: `ON` when every light of the group is on, else `OFF`, retained.
    public func group(user: String, group: String) -> String { "\(base)/\(user)/groups/\(group)" }

    /// `<base>/<user>/groups/<group>/set`: switches the group's lights. The room command filter
    /// `<base>/+/+/+/set` matches it too, which is how it is received (once, by one subscription).
    public func groupSet(user: String, group: String) -> String { "\(base)/\(user)/groups/\(group)/set" }

    /// The subscription for `<base>/<user>/lights/set` (group commands come through `commandFilter`).
    public var userLightsFilter: String { "\(base)/+/lights/set" }

    /// The user and group a group command addresses (`group` nil: every light of the user), or
    /// `nil` when the topic is neither `<base>/<user>/lights/set` nor `<base>/<user>/groups/<g>/set`.
    public func parseGroupCommandTopic(_ topic: String) -> (user: String, group: String?)? {
        guard topic.hasPrefix(base + "/") else { return nil }
        let rest = topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.allSatisfy({ !$0.isEmpty }), rest.last == "set", rest[0] != "bridge" else { return nil }
        if rest.count == 3, rest[1] == "lights" { return (String(rest[0]), nil) }
        if rest.count == 4, rest[1] == "groups" { return (String(rest[0]), String(rest[2])) }
        return nil
    }

    /// `<base>/<user>/events`: JSON events, not retained.
    public func events(user: String) -> String {
        "\(base)/\(user)/events"
    }

    /// `<base>/bridge/state`: `online`, or `offline` as the last will and on clean shutdown.
    public var bridgeState: String { "\(base)/bridge/state" }

    /// `<base>/bridge/<index>/state`: one cluster instance's `online`/`offline` (its last will).
    public func instanceState(_ index: Int) -> String { "\(base)/bridge/\(index)/state" }


    /// The cluster instance a state topic names, or `nil` for any other topic.
    public func parseInstanceState(_ topic: String) -> Int? {
        guard topic.hasPrefix(base + "/bridge/"), topic.hasSuffix("/state") else { return nil }
        let middle = topic.dropFirst(base.count + "/bridge/".count).dropLast("/state".count)
        guard !middle.isEmpty, middle.allSatisfy(\.isASCII), let index = Int(middle), index >= 0 else { return nil }
        return index
    }

    /// What a cluster instance subscribes to so it can serve a user it does not own: the reading
    /// topic of each configured sensor (retained) and the user's events. Exact topics, not
    /// `<base>/<user>/+/+`: some brokers (RabbitMQ) hand retained messages only to a subscription
    /// on the exact topic.
    public func mirrorTopics(of user: User) -> [String] {
        user.rooms.flatMap { room in room.sensors.map { sensor(user: user.id, room: room.id, sensor: $0) } }
            + [events(user: user.id)]
    }

    /// Every room's availability: how an instance notices an `offline` said about its own rooms.
    public var availabilityFilter: String { "\(base)/+/+/availability" }

    /// The user, room and sensor of a reading's topic under this base, or `nil` for any other
    /// topic (commands, availability and the bridge's own topics included).
    public func parseSensorTopic(_ topic: String) -> (user: String, room: String, sensor: String)? {
        guard topic.hasPrefix(base + "/") else { return nil }
        let rest = topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 3, rest.allSatisfy({ !$0.isEmpty }), rest[0] != "bridge", rest[2] != "availability"
        else { return nil }
        return (String(rest[0]), String(rest[1]), String(rest[2]))
    }

    /// The user and room of an availability topic under this base, or `nil` for any other topic.
    public func parseAvailabilityTopic(_ topic: String) -> RoomKey? {
        guard topic.hasPrefix(base + "/") else { return nil }
        let rest = topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 3, rest[2] == "availability", !rest[0].isEmpty, !rest[1].isEmpty, rest[0] != "bridge"
        else { return nil }
        return RoomKey(user: String(rest[0]), room: String(rest[1]))
    }

    /// The user of an events topic under this base, or `nil` for any other topic.
    public func parseEventsTopic(_ topic: String) -> String? {
        guard topic.hasPrefix(base + "/"), topic.hasSuffix("/events") else { return nil }
        let user = topic.dropFirst(base.count + 1).dropLast("/events".count)
        guard !user.isEmpty, !user.contains("/"), user != "bridge" else { return nil }
        return String(user)
    }

    /// `<base>/bridge/revoked/<session id>`: a logout made on one cluster instance, retained until
    /// the token expires (payload: its expiry in Unix seconds), so every instance refuses it.
    public func revokedSession(_ id: String) -> String { "\(base)/bridge/revoked/\(id)" }

    public var revokedSessionFilter: String { "\(base)/bridge/revoked/+" }

    /// The session id a revocation topic names, or `nil` for any other topic.
    public func parseRevokedSession(_ topic: String) -> String? {
        let prefix = base + "/bridge/revoked/"
        guard topic.hasPrefix(prefix) else { return nil }
        let id = topic.dropFirst(prefix.count)
        return id.isEmpty || id.contains("/") ? nil : String(id)
    }

    /// `<base>/bridge/alarms/<user>/<uuid>`: a cluster's copy of one alarm, retained (the alarm's
    /// JSON, or `deleted`), so every instance's database holds every alarm.
    public func alarm(user: String, uuid: String) -> String { "\(base)/bridge/alarms/\(user)/\(uuid)" }

    public var alarmFilter: String { "\(base)/bridge/alarms/+/+" }

    /// The user and uuid an alarm topic names, or `nil` for any other topic.
    public func parseAlarmTopic(_ topic: String) -> (user: String, uuid: String)? {
        parseReplicaTopic(topic, kind: "alarms")
    }

    /// `<base>/bridge/watchdogs/<user>/<uuid>`: a cluster's copy of one watchdog's fields, retained
    /// like an alarm's (README "Watchdogs"); its episode stays with the owner.
    public func watchdog(user: String, uuid: String) -> String { "\(base)/bridge/watchdogs/\(user)/\(uuid)" }

    public var watchdogFilter: String { "\(base)/bridge/watchdogs/+/+" }

    /// The user and uuid a watchdog topic names, or `nil` for any other topic.
    public func parseWatchdogTopic(_ topic: String) -> (user: String, uuid: String)? {
        parseReplicaTopic(topic, kind: "watchdogs")
    }

    private func parseReplicaTopic(_ topic: String, kind: String) -> (user: String, uuid: String)? {
        let prefix = base + "/bridge/\(kind)/"
        guard topic.hasPrefix(prefix) else { return nil }
        let rest = topic.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 2, rest.allSatisfy({ !$0.isEmpty }) else { return nil }
        return (String(rest[0]), String(rest[1]))
    }

    /// `<base>/bridge/<index>/history/request`: other instances ask instance `index` for the
    /// history of a user it owns.
    public func historyRequests(instance: Int) -> String { "\(base)/bridge/\(instance)/history/request" }

    /// `<base>/bridge/<index>/history/reply`: under it (`/<request id>`), the answers instance
    /// `index` waits for.
    public func historyReplies(instance: Int) -> String { "\(base)/bridge/\(instance)/history/reply" }

    /// `<base>/bridge/info`: JSON describing this bridge, retained.
    public var bridgeInfo: String { "\(base)/bridge/info" }

    /// Where requests to the bridge come (README, "Managing the home"): `<base>/bridge/request/<action>`.
    public var bridgeRequestPrefix: String { "\(base)/bridge/request/" }
    public var bridgeRequests: String { "\(base)/bridge/request/#" }
    /// Where the answer to a request on `action` goes.
    public func bridgeResponse(_ action: String) -> String { "\(base)/bridge/response/\(action)" }

    /// The subscription that receives light commands. It takes `/set` on any sensor, not just
    /// lights, so a command sent to a sensor that is not a light is rejected with an event instead
    /// of vanishing unseen.
    public var commandFilter: String { "\(base)/+/+/+/set" }

    /// The user and room a command topic addresses, or `nil` when the topic is not a command topic
    /// under this base. User and room are returned as written; the caller checks that they exist.
    public func parseCommandTopic(_ topic: String) -> (user: String, room: String, sensor: String)? {
        guard topic.hasPrefix(base + "/") else { return nil }
        let rest = topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 4, rest[3] == "set", rest.allSatisfy({ !$0.isEmpty }) else { return nil }
        return (String(rest[0]), String(rest[1]), String(rest[2]))
    }

    /// Whether a base topic is usable: non-empty, no wildcards, no leading or trailing slash.
    public static func validateBase(_ base: String) -> String? {
        if base.isEmpty { return "must not be empty" }
        if base.contains("+") || base.contains("#") { return "must not contain the MQTT wildcards + or #" }
        if base.hasPrefix("/") || base.hasSuffix("/") { return "must not start or end with /" }
        if base.contains("//") { return "must not contain an empty level (//)" }
        return nil
    }
}
