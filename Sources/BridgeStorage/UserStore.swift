import BridgeCore

/// Users an admin made through the API (README, "Admins and unbound devices"): id, username, the
/// password's argon2id hash (never the password) and the admin flag. They have no rooms here.
public struct UserStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    public func add(_ user: User, createdAt: Int64) throws(StorageError) {
        try database.execute(
            "INSERT INTO api_users (id, username, password_hash, admin, created_at) VALUES (?, ?, ?, ?, ?)",
            [.text(user.id), .text(user.username), .text(user.passwordHash), .integer(user.isAdmin ? 1 : 0),
             .integer(createdAt)])
    }

    /// Every API user, oldest first.
    public func all() throws(StorageError) -> [User] {
        try database.query("SELECT id, username, password_hash, admin FROM api_users ORDER BY created_at, id")
            .compactMap { row in
                guard row.count == 4, let id = row[0].text, let name = row[1].text, let hash = row[2].text,
                      let admin = row[3].integer else { return nil }
                return User(id: id, username: name, passwordHash: hash, rooms: [], isAdmin: admin != 0)
            }
    }

    /// Stores a changed hash and admin flag; returns whether the user exists.
    public func update(_ user: User) throws(StorageError) -> Bool {
        try database.execute("UPDATE api_users SET password_hash = ?, admin = ? WHERE id = ?",
                             [.text(user.passwordHash), .integer(user.isAdmin ? 1 : 0), .text(user.id)]) > 0
    }

    public func delete(id: String) throws(StorageError) -> Bool {
        try database.execute("DELETE FROM api_users WHERE id = ?", [.text(id)]) > 0
    }
}
