import BridgeCore
import Foundation

/// Sensor readings over time and each sensor's last value. Writes come in batches, one transaction
/// per batch, because a transaction per reading would make the disk the bridge's bottleneck.
public struct HistoryStore: Sendable {
    /// One reading to record.
    public struct Row: Sendable, Equatable {
        public var user: String
        public var room: String
        public var sensor: String
        public var time: Date
        public var value: String

        public init(user: String, room: String, sensor: String, time: Date, value: String) {
            self.user = user
            self.room = room
            self.sensor = sensor
            self.time = time
            self.value = value
        }
    }

    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Appends readings and updates each sensor's last value, all in one transaction. A reading
    /// already recorded (the same sensor, time and value: a batch written again after its
    /// connection broke during COMMIT) is not recorded twice.
    public func append(_ rows: [Row]) throws(StorageError) {
        guard !rows.isEmpty else { return }
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            for row in rows {
                try connection.execute(
                    "INSERT INTO readings (user_id, room_id, sensor, t, value) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    HistoryStore.values(row))
            }
            // A busy sensor has many rows in a batch; only its newest is its last value.
            for row in HistoryStore.newestPerSensor(rows) {
                try connection.execute(
                    """
                    INSERT INTO sensor_state (user_id, room_id, sensor, updated_at, value) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, room_id, sensor) DO UPDATE SET value = excluded.value,
                        updated_at = excluded.updated_at
                    """,
                    HistoryStore.values(row)
                )
            }
        }
    }

    private static func values(_ row: Row) -> [SQLValue] {
        [.text(row.user), .text(row.room), .text(row.sensor), .real(row.time.timeIntervalSince1970), .text(row.value)]
    }

    /// The last row of each sensor, in the order of those rows.
    static func newestPerSensor(_ rows: [Row]) -> [Row] {
        struct Sensor: Hashable {
            var user: String
            var room: String
            var sensor: String
        }
        var last: [Sensor: Int] = [:]
        for (index, row) in rows.enumerated() {
            last[Sensor(user: row.user, room: row.room, sensor: row.sensor)] = index
        }
        return last.values.sorted().map { rows[$0] }
    }

    /// Readings of one sensor at or after `since`, oldest first, at most `limit`.
    public func points(user: String, room: String, sensor: String, since: Date, limit: Int)
        throws(StorageError) -> [(time: Date, value: String)]
    {
        try database.query(
            """
            SELECT t, value FROM readings WHERE user_id = ? AND room_id = ? AND sensor = ? AND t >= ?
            ORDER BY t, rowid LIMIT ?
            """,
            [.text(user), .text(room), .text(sensor), .real(since.timeIntervalSince1970), .integer(Int64(limit))]
        ).compactMap { row in
            guard let time = row[0].real, let value = row[1].text else { return nil }
            return (Date(timeIntervalSince1970: time), value)
        }
    }

    /// Every sensor's last recorded value.
    public func lastValues() throws(StorageError) -> [Row] {
        try database.query("SELECT user_id, room_id, sensor, updated_at, value FROM sensor_state").compactMap { row in
            guard let user = row[0].text, let room = row[1].text, let sensor = row[2].text, let time = row[3].real,
                  let value = row[4].text else { return nil }
            return Row(user: user, room: room, sensor: sensor, time: Date(timeIntervalSince1970: time), value: value)
        }
    }

    /// Deletes readings older than `cutoff`; returns how many.
    @discardableResult
    public func prune(before cutoff: Date) throws(StorageError) -> Int {
        try database.execute("DELETE FROM readings WHERE t < ?", [.real(cutoff.timeIntervalSince1970)])
    }

    public func count() throws(StorageError) -> Int {
        Int(try database.query("SELECT count(*) FROM readings").first?.first?.integer ?? 0)
    }
}
