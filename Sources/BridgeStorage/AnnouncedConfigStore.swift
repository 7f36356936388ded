/// The Home Assistant discovery config topics the bridge announced in its last run. The next run
/// clears those it no longer has. Collecting the retained configs from the broker with a wildcard
/// subscription does that too, but not on a broker that gives retained messages only to exact
/// subscriptions (RabbitMQ's MQTT plugin, docs/brokers.md).
public struct AnnouncedConfigStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    public func topics() throws(StorageError) -> Set<String> {
        Set(try database.query("SELECT topic FROM announced_configs").compactMap { $0.first?.text })
    }

    /// Makes `topics` the whole record, at once.
    public func replace(with topics: Set<String>) throws(StorageError) {
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            try connection.execute("DELETE FROM announced_configs")
            for topic in topics.sorted() {
                try connection.execute("INSERT INTO announced_configs (topic) VALUES (?)", [.text(topic)])
            }
        }
    }
}
