import Foundation

/// The JSON events published on `<base>/<user>/events` (not retained).
public enum BridgeEvent {
    /// A command that was not applied: names the topic, a reason code and a readable message.
    public static func commandRejected(
        topic: String, room: String?, rejection: CommandRejection, source: String, at time: Date
    ) -> JSONValue {
        .object([
            ("type", .string("command_rejected")),
            ("topic", .string(topic)),
            ("room", room.map(JSONValue.string) ?? .null),
            ("reason", .string(rejection.code)),
            ("message", .string(rejection.description)),
            ("source", .string(source)),
            ("at", .string(Timestamp.iso8601(time))),
        ])
    }

    /// An alarm that fired.
    public static func alarm(_ alarm: Alarm, firedAt time: Date) -> JSONValue {
        .object([
            ("type", .string("alarm")),
            ("uuid", .string(alarm.uuid)),
            ("title", .string(alarm.title)),
            ("firedAt", .string(Timestamp.iso8601(time))),
        ])
    }

    /// A gas sensor that started or stopped detecting gas.
    public static func gas(room: String, detected: Bool, at time: Date) -> JSONValue {
        .object([
            ("type", .string("gas")),
            ("room", .string(room)),
            ("state", .string(detected ? "ON" : "OFF")),
            ("at", .string(Timestamp.iso8601(time))),
        ])
    }
}

/// The retained `<base>/bridge/info` document.
public struct BridgeInfo: Sendable {
    public var version: String
    public var sourceKind: String
    public var users: [User]
    public var startedAt: Date

    public init(version: String, sourceKind: String, users: [User], startedAt: Date) {
        self.version = version
        self.sourceKind = sourceKind
        self.users = users
        self.startedAt = startedAt
    }

    public var json: JSONValue {
        .object([
            ("version", .string(version)),
            ("source", .string(sourceKind)),
            ("users", .strings(users.map(\.id))),
            ("rooms", .integer(users.reduce(0) { $0 + $1.rooms.count })),
            ("startedAt", .string(Timestamp.iso8601(startedAt))),
        ])
    }
}

/// ISO 8601 timestamps in UTC with milliseconds, as every JSON the bridge sends uses them.
public enum Timestamp {
    public static func iso8601(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }
}
