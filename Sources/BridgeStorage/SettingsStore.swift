import CSQLite

/// Small named values the bridge generates once and must find again after a restart.
public struct SettingsStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// The stored value of `key`, storing `make()` first if there is none. Atomic: bridges opening
    /// the same file at once all get the one value that won.
    public func value(of key: String, orInsert make: () -> String) throws(StorageError) -> String {
        if let existing = try value(of: key) { return existing }
        try database.execute("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING", [.text(key), .text(make())])
        guard let stored = try value(of: key) else {
            throw StorageError("read setting \(key)", code: SQLITE_ERROR, message: "missing right after it was written")
        }
        return stored
    }

    /// Stores `value` under `key`, replacing what was there.
    public func set(_ key: String, to value: String) throws(StorageError) {
        _ = try database.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [.text(key), .text(value)])
    }

    public func value(of key: String) throws(StorageError) -> String? {
        try database.query("SELECT value FROM settings WHERE key = ?", [.text(key)]).first?.first?.text
    }
}
