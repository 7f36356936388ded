import BridgeCore
import BridgeMQTT
import Foundation

/// A kind of record every instance of a cluster keeps in its own database (alarms, watchdogs): its
/// retained topics and how it is read, written and compared.
protocol ReplicatedRecords: Sendable {
    associatedtype Record: Sendable
    /// `cluster-alarms`, for logs and the topic → feature table (docs/architecture.md).
    var featureName: String { get }
    /// `alarm`, for log lines.
    var noun: String { get }
    var filter: String { get }
    func topic(user: String, uuid: String) -> String
    func parseTopic(_ topic: String) -> (user: String, uuid: String)?
    func key(of record: Record) -> (user: String, uuid: String)
    /// The record's own fields as JSON, what is published and compared.
    func json(of record: Record) -> String
    func decode(_ payload: [UInt8], uuid: String, user: User) -> Result<Record, APIBody.Problem>
    func current(uuid: String, userID: String) throws -> Record?
    func insert(_ record: Record) throws
    func update(_ record: Record) throws
    func delete(uuid: String, userID: String) throws
}

/// Cluster (docs/scaling.md): a change made on one instance is published retained on the record's
/// topic (a deletion as `deleted`, so an instance that was down learns of it too) and applied by every
/// instance to its own database. Concurrent edits of one record end as the broker ordered them, on
/// every instance alike.
final class Replication<Records: ReplicatedRecords>: BridgeFeature {
    static var deleted: String { "deleted" }
    var name: String { records.featureName }

    private let records: Records
    private let home: HomeStore
    private let outbound: Outbound
    private let logger: Logger

    init(records: Records, home: HomeStore, outbound: Outbound, logger: Logger) {
        self.records = records
        self.home = home
        self.outbound = outbound
        self.logger = logger
    }

    var subscriptions: [MQTTSubscription] { [MQTTSubscription(filter: records.filter, qos: 0)] }

    /// A record this instance created or changed.
    func changed(_ record: Records.Record) {
        let key = records.key(of: record)
        outbound.send(records.topic(user: key.user, uuid: key.uuid), records.json(of: record))
    }

    /// A record this instance deleted.
    func deleted(uuid: String, userID: String) {
        outbound.send(records.topic(user: userID, uuid: uuid), Self.deleted)
    }

    /// Applies another instance's change (our own come back too, and change nothing).
    func handle(_ message: MQTTMessage) {
        guard let (userID, uuid) = records.parseTopic(message.topic), !message.payload.isEmpty else { return }
        guard let user = home.home.user(id: userID) else {
            logger.warning("ignored a replicated \(records.noun) of a user this config does not have", ["topic": message.topic])
            return
        }
        do {
            let current = try records.current(uuid: uuid, userID: userID)
            if message.text == Self.deleted {
                if current != nil { try records.delete(uuid: uuid, userID: userID) }
                return
            }
            let record: Records.Record
            switch records.decode(message.payload, uuid: uuid, user: user) {
            case .success(let decoded): record = decoded
            case .failure(let problem):
                logger.warning("ignored a replicated \(records.noun) that does not validate",
                               ["topic": message.topic, "problem": problem.message])
                return
            }
            // Unchanged (our own change coming back, or a restart): leave what has been handled alone.
            if let current, records.json(of: current) == records.json(of: record) { return }
            if current == nil { try records.insert(record) } else { try records.update(record) }
        } catch {
            logger.error("cannot apply a replicated \(records.noun)", ["topic": message.topic, "error": "\(error)"])
        }
    }
}
