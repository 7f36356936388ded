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
    /// time that passed before it existed. With `maxPerUser`, the alarm is stored only while the user
    /// has fewer (one statement, so parallel requests can't pass the cap together); returns whether
    /// it was stored.
    @discardableResult
    public func insert(_ alarm: Alarm, now: Date, maxPerUser: Int? = nil) throws(StorageError) -> Bool {
        try database.execute(
            """
            INSERT INTO alarms (title, fire_date, is_enabled, repeats, action_room, action_lights,
                                days, sun_event, sun_offset, uuid, user_id, handled_through, created_at)
            SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
            WHERE (SELECT COUNT(*) FROM alarms WHERE user_id = ?) < ?
            """,
            Self.values(alarm) + [.text(alarm.uuid), .text(alarm.userID), .real(now.timeIntervalSince1970),
                                  .real(now.timeIntervalSince1970), .text(alarm.userID), .integer(Int64(maxPerUser ?? Int.max))]
        ) > 0
    }

    /// Replaces an alarm's fields; returns false when the user has no such alarm. Editing resets
    /// what counts as handled to `now`, so moving an alarm into the past does not fire it.
    public func update(_ alarm: Alarm, now: Date) throws(StorageError) -> Bool {
        try database.execute(
            """
            UPDATE alarms SET title = ?, fire_date = ?, is_enabled = ?, repeats = ?, action_room = ?,
                action_lights = ?, days = ?, sun_event = ?, sun_offset = ?, handled_through = ?, next_check = NULL
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

    /// An enabled alarm as the scheduler sees it: with the time through which its occurrences are
    /// handled and when it must next be looked at (`nil`: not worked out since it was stored or edited).
    public struct Scheduled: Sendable {
        public var alarm: Alarm
        public var handledThrough: Date
        public var nextCheck: Date?
    }

    private static func scheduled(_ row: [SQLValue]) -> Scheduled? {
        guard row.count == columnCount + 2, let alarm = alarm(from: Array(row.prefix(columnCount))),
              let handled = row[columnCount].real
        else { return nil }
        return Scheduled(alarm: alarm, handledThrough: Date(timeIntervalSince1970: handled),
                         nextCheck: row[columnCount + 1].real.map(Date.init(timeIntervalSince1970:)))
    }

    private static let scheduledColumns = "\(columns), handled_through, next_check"

    /// Enabled alarms whose next check is not worked out yet (new or edited ones), at most `limit`.
    public func unscheduled(limit: Int) throws(StorageError) -> [Scheduled] {
        try database.query("SELECT \(Self.scheduledColumns) FROM alarms WHERE is_enabled = 1 AND next_check IS NULL LIMIT ?",
                           [.integer(Int64(limit))]).compactMap(Self.scheduled)
    }

    /// Enabled alarms to be looked at by `before`, soonest first, at most `limit` (an index range).
    public func due(before: Date, limit: Int) throws(StorageError) -> [Scheduled] {
        try database.query(
            """
            SELECT \(Self.scheduledColumns) FROM alarms WHERE is_enabled = 1 AND next_check <= ?
            ORDER BY next_check LIMIT ?
            """, [.real(before.timeIntervalSince1970), .integer(Int64(limit))]).compactMap(Self.scheduled)
    }

    /// The alarm as the scheduler sees it now, `nil` when deleted or disabled.
    public func scheduled(uuid: String) throws(StorageError) -> Scheduled? {
        try database.query("SELECT \(Self.scheduledColumns) FROM alarms WHERE uuid = ? AND is_enabled = 1",
                           [.text(uuid)]).first.flatMap(Self.scheduled)
    }

    /// Sets when alarms are next looked at, in one transaction. Only an alarm whose check is still
    /// what the scheduler read (`expected`) is changed, so an edit in between (which clears it) wins.
    public func setNextChecks(_ checks: [(uuid: String, expected: Date?, next: Date)]) throws(StorageError) {
        guard !checks.isEmpty else { return }
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            for check in checks {
                try connection.execute(
                    "UPDATE alarms SET next_check = ? WHERE uuid = ? AND next_check IS NOT DISTINCT FROM ?",
                    [.real(check.next.timeIntervalSince1970), .text(check.uuid),
                     check.expected.map { .real($0.timeIntervalSince1970) } ?? .null])
            }
        }
    }

    /// Claims an occurrence as fired (or skipped) in one transaction with its bookkeeping: handled
    /// through `occurrence`, checked next at `nextCheck`, and a one-shot alarm disabled. Returns
    /// false, changing nothing, when the occurrence was already handled (another instance sharing
    /// the database claimed it) or when `fence` is given and its lease is no longer held: so an
    /// occurrence fires once, even across a takeover (docs/scaling.md, "Leases").
    @discardableResult
    public func recordFiring(uuid: String, occurrence: Date, firedAt: Date, skipped: Bool, disable: Bool,
                             nextCheck: Date, fence: LeaseFence? = nil) throws(StorageError) -> Bool {
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) -> Bool in
            if let fence, !(try fence.holds(connection, now: firedAt)) { return false }
            let claimed = try connection.execute(
                """
                UPDATE alarms SET handled_through = ?, next_check = ?,
                    is_enabled = CASE WHEN ? THEN 0 ELSE is_enabled END
                WHERE uuid = ? AND handled_through < ?
                """,
                [.real(occurrence.timeIntervalSince1970), .real(nextCheck.timeIntervalSince1970),
                 .integer(disable ? 1 : 0), .text(uuid), .real(occurrence.timeIntervalSince1970)]
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
