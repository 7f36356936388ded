import BridgeCore
import Foundation

/// Watchdogs and their episodes' state in the database, always looked up with their owner so no query
/// can reach another user's watchdog.
public struct WatchdogStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    private static let columns = "uuid, user_id, title, room, sensor, condition, value, duration, quiet_from, quiet_to, "
        + "is_enabled, phase, fired_at, breach_since, armed_at"

    private static func entry(from row: [SQLValue]) -> (Watchdog, WatchdogState)? {
        guard row.count == 15, let uuid = row[0].text, let user = row[1].text, let title = row[2].text,
              let room = row[3].text, let sensor = row[4].text, let condition = row[5].text.flatMap(Watchdog.Condition.init),
              let duration = row[7].real, let enabled = row[10].integer,
              let phase = row[11].text.flatMap(WatchdogState.Phase.init), let armedAt = row[14].real
        else { return nil }
        var quiet: Watchdog.QuietHours?
        if let from = row[8].integer, let to = row[9].integer { quiet = Watchdog.QuietHours(from: Int(from), to: Int(to)) }
        let watchdog = Watchdog(uuid: uuid, userID: user, title: title, room: room, sensor: SensorKind.named(sensor),
                                condition: condition, value: row[6].real, duration: duration, quiet: quiet,
                                isEnabled: enabled != 0)
        let state = WatchdogState(phase: phase, firedAt: row[12].real.map(Date.init(timeIntervalSince1970:)),
                                  breachSince: row[13].real.map(Date.init(timeIntervalSince1970:)),
                                  armedAt: Date(timeIntervalSince1970: armedAt))
        return (watchdog, state)
    }

    private static func fields(_ watchdog: Watchdog) -> [SQLValue] {
        [.text(watchdog.title), .text(watchdog.room), .text(watchdog.sensor.id), .text(watchdog.condition.rawValue),
         watchdog.value.map(SQLValue.real) ?? .null, .real(watchdog.duration),
         watchdog.quiet.map { .integer(Int64($0.from)) } ?? .null, watchdog.quiet.map { .integer(Int64($0.to)) } ?? .null,
         .integer(watchdog.isEnabled ? 1 : 0)]
    }

    /// Stores a new watchdog, armed at `now`.
    public func insert(_ watchdog: Watchdog, now: Date) throws(StorageError) {
        try database.execute(
            """
            INSERT INTO watchdogs (title, room, sensor, condition, value, duration, quiet_from, quiet_to, is_enabled,
                                   uuid, user_id, phase, armed_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'armed', ?)
            """,
            Self.fields(watchdog) + [.text(watchdog.uuid), .text(watchdog.userID), .real(now.timeIntervalSince1970)]
        )
    }

    /// Replaces a watchdog's fields and starts a new episode at `now` (armed); false when the user
    /// has no such watchdog.
    public func update(_ watchdog: Watchdog, now: Date) throws(StorageError) -> Bool {
        try database.execute(
            """
            UPDATE watchdogs SET title = ?, room = ?, sensor = ?, condition = ?, value = ?, duration = ?, quiet_from = ?,
                quiet_to = ?, is_enabled = ?, phase = 'armed', fired_at = NULL, breach_since = NULL, armed_at = ?
            WHERE uuid = ? AND user_id = ?
            """,
            Self.fields(watchdog) + [.real(now.timeIntervalSince1970), .text(watchdog.uuid), .text(watchdog.userID)]
        ) > 0
    }

    public func delete(uuid: String, userID: String) throws(StorageError) -> Bool {
        try database.execute("DELETE FROM watchdogs WHERE uuid = ? AND user_id = ?", [.text(uuid), .text(userID)]) > 0
    }

    public func watchdog(uuid: String, userID: String) throws(StorageError) -> (Watchdog, WatchdogState)? {
        try database.query("SELECT \(Self.columns) FROM watchdogs WHERE uuid = ? AND user_id = ?",
                           [.text(uuid), .text(userID)]).first.flatMap(Self.entry)
    }

    public func watchdogs(userID: String) throws(StorageError) -> [(Watchdog, WatchdogState)] {
        try database.query("SELECT \(Self.columns) FROM watchdogs WHERE user_id = ? ORDER BY title, uuid",
                           [.text(userID)]).compactMap(Self.entry)
    }

    public func count(userID: String) throws(StorageError) -> Int {
        Int(try database.query("SELECT COUNT(*) FROM watchdogs WHERE user_id = ?", [.text(userID)]).first?.first?.integer ?? 0)
    }

    /// Every enabled watchdog with its state, for the monitor.
    public func enabled() throws(StorageError) -> [(Watchdog, WatchdogState)] {
        try database.query("SELECT \(Self.columns) FROM watchdogs WHERE is_enabled = 1").compactMap(Self.entry)
    }

    /// Keeps an episode's new state (the watchdog's fields untouched).
    public func save(_ state: WatchdogState, uuid: String) throws(StorageError) {
        try database.execute(
            "UPDATE watchdogs SET phase = ?, fired_at = ?, breach_since = ?, armed_at = ? WHERE uuid = ?",
            [.text(state.phase.rawValue), state.firedAt.map { .real($0.timeIntervalSince1970) } ?? .null,
             state.breachSince.map { .real($0.timeIntervalSince1970) } ?? .null, .real(state.armedAt.timeIntervalSince1970),
             .text(uuid)]
        )
    }
}
