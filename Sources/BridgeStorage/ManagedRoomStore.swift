import BridgeCore

/// Rooms made through the API or MQTT requests (README, "Managing the home"), always with their
/// owner in the key so no statement can reach another user's room.
public struct ManagedRoomStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Every kept room, in the order they were made.
    public func all() throws(StorageError) -> [ManagedRoom] {
        try database.query("SELECT user_id, room_id, name, sensors FROM managed_rooms ORDER BY position").compactMap { row in
            guard row.count == 4, let user = row[0].text, let id = row[1].text, let name = row[2].text,
                  let sensors = row[3].text else { return nil }
            return ManagedRoom(user: user, id: id, name: name, sensors: sensors)
        }
    }

    /// Stores a new room after the others.
    public func insert(_ room: ManagedRoom) throws(StorageError) {
        try database.execute(
            """
            INSERT INTO managed_rooms (user_id, room_id, name, sensors, position)
            SELECT ?, ?, ?, ?, COALESCE(MAX(position), 0) + 1 FROM managed_rooms
            """,
            [.text(room.user), .text(room.id), .text(room.name), .text(room.sensors)])
    }

    /// Replaces a room's name and sensors; false when the user has no such room.
    public func update(_ room: ManagedRoom) throws(StorageError) -> Bool {
        try database.execute("UPDATE managed_rooms SET name = ?, sensors = ? WHERE user_id = ? AND room_id = ?",
                             [.text(room.name), .text(room.sensors), .text(room.user), .text(room.id)]) > 0
    }

    public func delete(user: String, room: String) throws(StorageError) -> Bool {
        try database.execute("DELETE FROM managed_rooms WHERE user_id = ? AND room_id = ?", [.text(user), .text(room)]) > 0
    }
}
