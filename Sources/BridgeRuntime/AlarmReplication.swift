import BridgeCore
import BridgeMQTT
import BridgeStorage
import Foundation

/// Cluster (docs/scaling.md): every instance keeps every alarm, so any instance answers the alarm routes
/// for any user, while only the user's owner fires them. A change made on one instance is
/// published retained on `<base>/bridge/alarms/<user>/<uuid>` (a deletion as `deleted`, so an
/// instance that was down learns of it too) and applied by every instance to its own database.
/// Concurrent edits of one alarm end as the broker ordered them, on every instance alike.
final class AlarmReplication: BridgeFeature {
    static let deleted = "deleted"
    let name = "cluster-alarms"

    private let store: AlarmStore
    private let home: HomeStore
    private let topics: Topics
    private let outbound: Outbound
    private let logger: Logger

    init(store: AlarmStore, home: HomeStore, topics: Topics, outbound: Outbound, logger: Logger) {
        self.store = store
        self.home = home
        self.topics = topics
        self.outbound = outbound
        self.logger = logger
    }

    var subscriptions: [MQTTSubscription] { [MQTTSubscription(filter: topics.alarmFilter, qos: 0)] }

    /// An alarm this instance created or changed.
    func changed(_ alarm: Alarm) {
        outbound.send(topics.alarm(user: alarm.userID, uuid: alarm.uuid), alarm.json.serialized)
    }

    /// An alarm this instance deleted.
    func deleted(uuid: String, userID: String) {
        outbound.send(topics.alarm(user: userID, uuid: uuid), Self.deleted)
    }

    /// Applies another instance's change (our own come back too, and change nothing).
    func handle(_ message: MQTTMessage) {
        guard let (userID, uuid) = topics.parseAlarmTopic(message.topic), !message.payload.isEmpty else { return }
        guard let user = home.home.user(id: userID) else {
            logger.warning("ignored a replicated alarm of a user this config does not have", ["topic": message.topic])
            return
        }
        do {
            let current = try store.alarm(uuid: uuid, userID: userID)
            if message.text == Self.deleted {
                if current != nil { _ = try store.delete(uuid: uuid, userID: userID) }
                return
            }
            let draft: AlarmDraft
            switch AlarmDraft.parse(message.payload, rooms: user.rooms) {
            case .success(let parsed): draft = parsed
            case .failure(let problem):
                logger.warning("ignored a replicated alarm that does not validate",
                               ["topic": message.topic, "problem": problem.message])
                return
            }
            let alarm = draft.alarm(uuid: uuid, userID: userID)
            // Unchanged (our own change coming back, or a restart): leave what has been handled alone.
            if let current, current.json.serialized == alarm.json.serialized { return }
            if current == nil {
                try store.insert(alarm, now: Date())
            } else {
                _ = try store.update(alarm, now: Date())
            }
        } catch {
            logger.error("cannot apply a replicated alarm", ["topic": message.topic, "error": error.description])
        }
    }
}
