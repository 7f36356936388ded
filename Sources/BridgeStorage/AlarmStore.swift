import BridgeCore
import Foundation

/// Alarms in the database, always looked up together with their owner so no query can reach
/// another user's alarm.
public struct AlarmStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    private static let columns =
        "uuid, user_id, title, fire_date, is_enabled, repeats, action_room, action_lights, days, sun_event, sun_offset"
    private static let columnCount = 11

    private static func alarm(from row: [SQLValue]) -> Alarm? {
        guard row.count == columnCount, let uuid = row[0].text, let user = row[1].text, let title = row[2].text,
              let fireDate = row[3].real, let enabled = row[4].integer, let repeats = row[5].text.flatMap(Alarm.Repeats.init)
        else { return nil }
        var action: Alarm.Action?
        if let room = row[6].text, let lights = row[7].text.flatMap(LightCommand.init(rawValue:)) {
            if room.hasPrefix(groupPrefix) {
                action = Alarm.Action(room: "", lights: lights, group: String(room.dropFirst(groupPrefix.count)))
            } else {
                action = Alarm.Action(room: room, lights: lights)
            }
        }
        // Weekdays as "mon,fri"; the sun as its event and the offset in seconds.
        let days = Set((row[8].text ?? "").split(separator: ",").compactMap { Alarm.Weekday(rawValue: String($0)) })
        var sun: Alarm.SunTime?
        if let event = row[9].text.flatMap(SolarEvents.Event.init(rawValue:)) {
            sun = Alarm.SunTime(event: event, offset: row[10].real ?? 0)
        }
        return Alarm(uuid: uuid, userID: user, title: title, fireDate: Date(timeIntervalSince1970: fireDate),
                     isEnabled: enabled != 0, repeats: repeats, action: action, days: days, sun: sun)
    }

    /// `action_room` holds a room id, `*` (every light) or `group:<name>`: room ids and group names
    /// never hold `:` or `*` (README, "Configuration"), so the three never mix.
    private static let groupPrefix = "group:"

    private static func values(_ alarm: Alarm) -> [SQLValue] {
        [.text(alarm.title), .real(alarm.fireDate.timeIntervalSince1970), .integer(alarm.isEnabled ? 1 : 0),
         .text(alarm.repeats.rawValue), alarm.action.map { .text($0.group.map { groupPrefix + $0 } ?? $0.room) } ?? .null,
         alarm.action.map { .text($0.lights.rawValue) } ?? .null,
         alarm.days.isEmpty ? .null : .text(alarm.days.sorted().map(\.rawValue).joined(separator: ",")),
         alarm.sun.map { .text($0.event.rawValue) } ?? .null, alarm.sun.map { .real($0.offset) } ?? .null]
    }

    /// Stores a new alarm. Occurrences up to `now` count as handled: a new alarm never fires for a
    /// time that passed before it existed.
    public func insert(_ alarm: Alarm, now: Date) throws(StorageError) {
        try database.execute(
            """
            INSERT INTO alarms (title, fire_date, is_enabled, repeats, action_room, action_lights,
                                days, sun_event, sun_offset, uuid, user_id, handled_through, created_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            Self.values(alarm) + [.text(alarm.uuid), .text(alarm.userID), .real(now.timeIntervalSince1970),
                                  .real(now.timeIntervalSince1970)]
        )
    }

    /// Replaces an alarm's fields; returns false when the user has no such alarm. Editing resets
    /// what counts as handled to `now`, so moving an alarm into the past does not fire it.
    public func update(_ alarm: Alarm, now: Date) throws(StorageError) -> Bool {
        try database.execute(
            """
            UPDATE alarms SET title = ?, fire_date = ?, is_enabled = ?, repeats = ?, action_room = ?,
                action_lights = ?, days = ?, sun_event = ?, sun_offset = ?, handled_through = ?
            WHERE uuid = ? AND user_id = ?
            """,
            Self.values(alarm) + [.real(now.timeIntervalSince1970), .text(alarm.uuid), .text(alarm.userID)]
        ) > 0
    }

    public func delete(uuid: String, userID: String) throws(StorageError) -> Bool {
        try database.execute("DELETE FROM alarms WHERE uuid = ? AND user_id = ?", [.text(uuid), .text(userID)]) > 0
    }

    public func alarm(uuid: String, userID: String) throws(StorageError) -> Alarm? {
        try database.query("SELECT \(Self.columns) FROM alarms WHERE uuid = ? AND user_id = ?",
                           [.text(uuid), .text(userID)]).first.flatMap(Self.alarm)
    }

    public func alarms(userID: String) throws(StorageError) -> [Alarm] {
        try database.query("SELECT \(Self.columns) FROM alarms WHERE user_id = ?", [.text(userID)]).compactMap(Self.alarm)
    }

    /// Every enabled alarm with the time through which its occurrences are handled.
    public func enabledAlarms() throws(StorageError) -> [(alarm: Alarm, handledThrough: Date)] {
        try database.query("SELECT \(Self.columns), handled_through FROM alarms WHERE is_enabled = 1").compactMap { row in
            guard let alarm = Self.alarm(from: Array(row.prefix(Self.columnCount))),
                  let handled = row[Self.columnCount].real
            else { return nil }
            return (alarm, Date(timeIntervalSince1970: handled))
        }
    }

    /// Claims an occurrence as fired (or skipped) in one transaction with its bookkeeping: handled
    /// through `occurrence`, and a one-shot alarm disabled. Returns false, changing nothing, when
    /// the occurrence was already handled (another instance sharing the database claimed it) or
    /// when `fence` is given and its lease is no longer held: so an occurrence fires once, even
    /// across a takeover (docs/scaling.md, "Leases").
    @discardableResult
    public func recordFiring(uuid: String, occurrence: Date, firedAt: Date, skipped: Bool, disable: Bool,
                             fence: LeaseFence? = nil) throws(StorageError) -> Bool {
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) -> Bool in
            if let fence, !(try fence.holds(connection, now: firedAt)) { return false }
            let claimed = try connection.execute(
                """
                UPDATE alarms SET handled_through = ?, is_enabled = CASE WHEN ? THEN 0 ELSE is_enabled END
                WHERE uuid = ? AND handled_through < ?
                """,
                [.real(occurrence.timeIntervalSince1970), .integer(disable ? 1 : 0), .text(uuid),
                 .real(occurrence.timeIntervalSince1970)]
            )
            guard claimed == 1 else { return false }
            try connection.execute(
                "INSERT INTO alarm_firings (uuid, occurrence, fired_at, skipped) VALUES (?, ?, ?, ?)",
                [.text(uuid), .real(occurrence.timeIntervalSince1970), .real(firedAt.timeIntervalSince1970),
                 .integer(skipped ? 1 : 0)]
            )
            return true
        }
    }
}
