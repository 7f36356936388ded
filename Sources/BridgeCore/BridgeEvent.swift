import Foundation

/// The events published on `<base>/<user>/events` (not retained) and sent to the user's event
/// streams, as values: each subscriber of the state bus renders what it needs.
public enum BridgeEvent: Sendable, Equatable {
    /// A command that was not applied: names the topic, a reason code and a readable message.
    case commandRejected(topic: String, room: String?, rejection: CommandRejection, source: String, at: Date)
    /// An alarm that fired.
    case alarm(uuid: String, title: String, firedAt: Date)
    /// A gas sensor that started or stopped detecting gas.
    case gas(room: String, detected: Bool, at: Date)
    /// A watchdog that fired (`recovered: false`) or whose condition ended after it fired.
    case watchdog(Watchdog, recovered: Bool, at: Date)
    /// An event another cluster instance published for one of its users, passed on as it came.
    case relayed(type: String, json: String)

    /// An alarm that fired.
    public static func alarm(_ alarm: Alarm, firedAt time: Date) -> BridgeEvent {
        .alarm(uuid: alarm.uuid, title: alarm.title, firedAt: time)
    }

    /// The event's `type` member (the name of its Server-Sent Event).
    public var type: String {
        switch self {
        case .commandRejected: "command_rejected"
        case .alarm: "alarm"
        case .gas: "gas"
        case .watchdog: "watchdog"
        case .relayed(let type, _): type
        }
    }

    /// The room the event is about, which decides whether a guest's stream gets it (README, "Guests"):
    /// alarms and watchdogs are the user's own business, and a relayed event is not looked into.
    public var room: String? {
        switch self {
        case .commandRejected(_, let room, _, _, _): room
        case .gas(let room, _, _): room
        case .alarm, .watchdog, .relayed: nil
        }
    }

    /// The event as JSON text, as published.
    public var serialized: String {
        switch self {
        case .relayed(_, let json): json
        default: json.serialized
        }
    }

    /// The event's JSON (a relayed event as an object with only its `type`: its text is `serialized`).
    public var json: JSONValue {
        switch self {
        case .commandRejected(let topic, let room, let rejection, let source, let time):
            .object([
                ("type", .string(type)),
                ("topic", .string(topic)),
                ("room", room.map(JSONValue.string) ?? .null),
                ("reason", .string(rejection.code)),
                ("message", .string(rejection.description)),
                ("source", .string(source)),
                ("at", .string(Timestamp.iso8601(time))),
            ])
        case .alarm(let uuid, let title, let time):
            .object([
                ("type", .string(type)),
                ("uuid", .string(uuid)),
                ("title", .string(title)),
                ("firedAt", .string(Timestamp.iso8601(time))),
            ])
        case .gas(let room, let detected, let time):
            .object([
                ("type", .string(type)),
                ("room", .string(room)),
                ("state", .string(detected ? "ON" : "OFF")),
                ("at", .string(Timestamp.iso8601(time))),
            ])
        case .watchdog(let watchdog, let recovered, let time):
            .object([
                ("type", .string(type)),
                ("state", .string(recovered ? "recovered" : "fired")),
                ("uuid", .string(watchdog.uuid)),
                ("title", .string(watchdog.title)),
                ("room", .string(watchdog.room)),
                ("sensor", .string(watchdog.sensor.id)),
                ("condition", .string(watchdog.condition.rawValue)),
                ("for", .string(Watchdog.durationText(watchdog.duration))),
                ("at", .string(Timestamp.iso8601(time))),
            ])
        case .relayed(let type, _):
            .object([("type", .string(type))])
        }
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
    /// `2026-11-29T19:51:22.123Z`: UTC with milliseconds, as Foundation's
    /// `ISO8601FormatStyle(includingFractionalSeconds: true)` writes it, but in integer arithmetic:
    /// it stamps every API room answer and event, where Foundation's formatter showed in profiles.
    public static func iso8601(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        // Outside years 1–9999 the fixed-width form doesn't apply: leave those to Foundation.
        guard seconds.isFinite, (-62_135_596_800.0..<253_402_300_800.0).contains(seconds) else {
            return Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
        }
        // Whole seconds and the fraction from the reference-date interval, as Foundation takes them,
        // so the milliseconds are truncated alike.
        let sinceReference = date.timeIntervalSinceReferenceDate
        let whole = sinceReference.rounded(.down)
        let fraction = Int64(((sinceReference - whole) * 1000).rounded(.down))
        let millis = (Int64(whole) + 978_307_200) * 1000 + min(fraction, 999)
        let (days, msOfDay) = millis.quotientAndRemainder(dividingBy: 86_400_000)
        let (day, ms) = msOfDay < 0 ? (days - 1, msOfDay + 86_400_000) : (days, msOfDay)
        let (year, month, dayOfMonth) = civil(fromDays: day)
        var text: [UInt8] = []
        text.reserveCapacity(24)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4); text.append(UInt8(ascii: "-")); digits(month, 2); text.append(UInt8(ascii: "-"))
        digits(dayOfMonth, 2); text.append(UInt8(ascii: "T"))
        digits(ms / 3_600_000, 2); text.append(UInt8(ascii: ":")); digits(ms / 60_000 % 60, 2)
        text.append(UInt8(ascii: ":")); digits(ms / 1000 % 60, 2); text.append(UInt8(ascii: "."))
        digits(ms % 1000, 3); text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }

    /// Year, month and day of a count of days since 1970-01-01 in the proleptic Gregorian
    /// calendar: counted in 400-year eras (146,097 days each) of years that start on 1 March, so
    /// the leap day falls at the end of a year.
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
