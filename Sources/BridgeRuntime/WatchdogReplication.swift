import BridgeCore
import BridgeStorage
import Foundation

/// Cluster (docs/scaling.md): every instance keeps every watchdog's fields, as it keeps every alarm,
/// so the watchdog routes answer on any instance, while only the user's owner watches and keeps the
/// episode; changes travel on `<base>/bridge/watchdogs/<user>/<uuid>`.
typealias WatchdogReplication = Replication<ReplicatedWatchdogs>

struct ReplicatedWatchdogs: ReplicatedRecords {
    let store: WatchdogStore
    let topics: Topics

    var featureName: String { "cluster-watchdogs" }
    var noun: String { "watchdog" }
    var filter: String { topics.watchdogFilter }
    func topic(user: String, uuid: String) -> String { topics.watchdog(user: user, uuid: uuid) }
    func parseTopic(_ topic: String) -> (user: String, uuid: String)? { topics.parseWatchdogTopic(topic) }
    func key(of watchdog: Watchdog) -> (user: String, uuid: String) { (watchdog.userID, watchdog.uuid) }
    func json(of watchdog: Watchdog) -> String { watchdog.json.serialized }
    func decode(_ payload: [UInt8], uuid: String, user: User) -> Result<Watchdog, APIBody.Problem> {
        WatchdogDraft.parse(payload, rooms: user.rooms).map { $0.watchdog(uuid: uuid, userID: user.id) }
    }
    func current(uuid: String, userID: String) throws -> Watchdog? { try store.watchdog(uuid: uuid, userID: userID)?.0 }
    func insert(_ watchdog: Watchdog) throws { try store.insert(watchdog, now: Date()) }
    func update(_ watchdog: Watchdog) throws { _ = try store.update(watchdog, now: Date()) }
    func delete(uuid: String, userID: String) throws { _ = try store.delete(uuid: uuid, userID: userID) }
}
