/// The Home Assistant discovery config topics the bridge announced in its last run. The next run
/// clears those it no longer has. Collecting the retained configs from the broker with a wildcard
/// subscription does that too, but not on a broker that gives retained messages only to exact
/// subscriptions (RabbitMQ's MQTT plugin, docs/brokers.md).
///
/// Kept per `instance`: cluster instances sharing one PostgreSQL database each clear only what
/// they announced themselves (with a database of its own, an instance uses 0).
public struct AnnouncedConfigStore: Sendable {
    private let database: Database
    private let instance: Int64

    public init(database: Database, instance: Int = 0) {
        self.database = database
        self.instance = Int64(instance)
    }

    public func topics() throws(StorageError) -> Set<String> {
        Set(try database.query("SELECT topic FROM announced_topics WHERE instance = ?", [.integer(instance)])
            .compactMap { $0.first?.text })
    }

    /// Makes `topics` the whole record, at once.
    public func replace(with topics: Set<String>) throws(StorageError) {
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            try connection.execute("DELETE FROM announced_topics WHERE instance = ?", [.integer(instance)])
            for topic in topics.sorted() {
                try connection.execute("INSERT INTO announced_topics (instance, topic) VALUES (?, ?)",
                                       [.integer(instance), .text(topic)])
            }
        }
    }
}
