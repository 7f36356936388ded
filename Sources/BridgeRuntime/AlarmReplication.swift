import BridgeCore
import BridgeStorage
import Foundation

/// Cluster (docs/scaling.md): every instance keeps every alarm, so any instance answers the alarm routes
/// for any user, while only the user's owner fires them; changes travel on
/// `<base>/bridge/alarms/<user>/<uuid>`.
typealias AlarmReplication = Replication<ReplicatedAlarms>

struct ReplicatedAlarms: ReplicatedRecords {
    let store: AlarmStore
    let topics: Topics

    var featureName: String { "cluster-alarms" }
    var noun: String { "alarm" }
    var filter: String { topics.alarmFilter }
    func topic(user: String, uuid: String) -> String { topics.alarm(user: user, uuid: uuid) }
    func parseTopic(_ topic: String) -> (user: String, uuid: String)? { topics.parseAlarmTopic(topic) }
    func key(of alarm: Alarm) -> (user: String, uuid: String) { (alarm.userID, alarm.uuid) }
    func json(of alarm: Alarm) -> String { alarm.json.serialized }
    func decode(_ payload: [UInt8], uuid: String, user: User) -> Result<Alarm, APIBody.Problem> {
        AlarmDraft.parse(payload, rooms: user.rooms, groups: user.groups).map { $0.alarm(uuid: uuid, userID: user.id) }
    }
    func current(uuid: String, userID: String) throws -> Alarm? { try store.alarm(uuid: uuid, userID: userID) }
    func insert(_ alarm: Alarm) throws { try store.insert(alarm, now: Date()) }
    func update(_ alarm: Alarm) throws { _ = try store.update(alarm, now: Date()) }
    func delete(uuid: String, userID: String) throws { _ = try store.delete(uuid: uuid, userID: userID) }
}
