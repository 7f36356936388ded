import BridgeCore
import BridgeStorage

extension Database {
    /// Opens the configured database (`storage.url`, or the SQLite file at `storage.path`); the
    /// error names the key and the location, never the password (README "PostgreSQL").
    static func open(_ configuration: BridgeConfiguration) throws -> Database {
        let storage = configuration.storage
        do {
            return try Database(url: storage.location)
        } catch {
            let key = storage.url == nil ? "storage.path \(storage.path)" : "storage.url \(storage.location)"
            throw RuntimeError("cannot open \(key): \(error.description)")
        }
    }

    /// A second connection to `database` (docs/scaling.md, "Leases"); the error names the location.
    static func separateConnection(of database: Database) throws -> Database {
        do {
            return try database.separateConnection()
        } catch {
            throw RuntimeError("cannot open a second connection to storage.url \(database.url): \(error.description)")
        }
    }
}
