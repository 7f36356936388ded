import BridgeCore

/// Guests (README, "Guests"), always looked up together with their owner. Rows go once the guest
/// has expired; `rooms` holds the room ids separated by line feeds (room ids are topic levels, which
/// never contain one).
public struct GuestStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    public func add(_ guest: Guest, createdAt: Int64) throws(StorageError) {
        try database.execute(
            "INSERT INTO guests (id, user_id, rooms, access, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [.text(guest.id), .text(guest.userID), .text(guest.rooms.joined(separator: "\n")),
             .text(guest.access.rawValue), .integer(guest.expiresAt), .integer(createdAt)])
    }

    /// Every guest not expired at `now` (Unix seconds), oldest first.
    public func live(now: Int64) throws(StorageError) -> [Guest] {
        try database.query(
            "SELECT id, user_id, rooms, access, expires_at FROM guests WHERE expires_at > ? ORDER BY created_at, id",
            [.integer(now)]
        ).compactMap { row in
            guard row.count == 5, let id = row[0].text, let user = row[1].text, let rooms = row[2].text,
                  let access = row[3].text.flatMap(Guest.Access.init(rawValue:)), let expiry = row[4].integer
            else { return nil }
            return Guest(id: id, userID: user, rooms: rooms.split(separator: "\n").map(String.init), access: access,
                         expiresAt: expiry)
        }
    }

    /// Deletes one of a user's guests; returns whether there was one.
    public func delete(id: String, userID: String) throws(StorageError) -> Bool {
        try database.execute("DELETE FROM guests WHERE id = ? AND user_id = ?", [.text(id), .text(userID)]) > 0
    }

    /// Deletes every guest of a user (the user logged out everywhere); returns how many.
    @discardableResult
    public func deleteAll(userID: String) throws(StorageError) -> Int {
        try database.execute("DELETE FROM guests WHERE user_id = ?", [.text(userID)])
    }

    /// Deletes guests expired at `now`; returns how many.
    @discardableResult
    public func purgeExpired(now: Int64) throws(StorageError) -> Int {
        try database.execute("DELETE FROM guests WHERE expires_at <= ?", [.integer(now)])
    }
}
