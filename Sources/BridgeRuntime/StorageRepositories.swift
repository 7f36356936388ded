import BridgeCore
import BridgeStorage
import Foundation

/// The API's alarm repository, backed by the database; in a cluster, every change is also passed
/// on to the other instances.
struct DatabaseAlarms: AlarmRepository {
    let store: AlarmStore
    var replication: AlarmReplication? = nil

    func alarms(userID: String) throws -> [Alarm] { try store.alarms(userID: userID) }
    func alarm(uuid: String, userID: String) throws -> Alarm? { try store.alarm(uuid: uuid, userID: userID) }

    func create(_ alarm: Alarm, maxPerUser: Int) throws -> Bool {
        guard try store.insert(alarm, now: Date(), maxPerUser: maxPerUser) else { return false }
        replication?.changed(alarm)
        return true
    }

    func update(_ alarm: Alarm) throws -> Bool {
        guard try store.update(alarm, now: Date()) else { return false }
        replication?.changed(alarm)
        return true
    }

    func delete(uuid: String, userID: String) throws -> Bool {
        guard try store.delete(uuid: uuid, userID: userID) else { return false }
        replication?.deleted(uuid: uuid, userID: userID)
        return true
    }
}

/// The API's watchdog repository, backed by the database.
struct DatabaseWatchdogs: WatchdogRepository {
    let store: WatchdogStore
    var replication: WatchdogReplication? = nil

    func watchdogs(userID: String) throws -> [(Watchdog, WatchdogState)] { try store.watchdogs(userID: userID) }
    func watchdog(uuid: String, userID: String) throws -> (Watchdog, WatchdogState)? {
        try store.watchdog(uuid: uuid, userID: userID)
    }
    func count(userID: String) throws -> Int { try store.count(userID: userID) }

    func create(_ watchdog: Watchdog) throws -> WatchdogState {
        let now = Date()
        try store.insert(watchdog, now: now)
        replication?.changed(watchdog)
        return WatchdogState(armedAt: now)
    }

    func update(_ watchdog: Watchdog) throws -> WatchdogState? {
        let now = Date()
        guard try store.update(watchdog, now: now) else { return nil }
        replication?.changed(watchdog)
        return WatchdogState(armedAt: now)
    }

    func delete(uuid: String, userID: String) throws -> Bool {
        guard try store.delete(uuid: uuid, userID: userID) else { return false }
        replication?.deleted(uuid: uuid, userID: userID)
        return true
    }
}

/// The API's history repository, backed by the database.
struct DatabaseHistory: HistoryRepository {
    let store: HistoryStore

    func points(user: String, room: String, sensor: String, since: Date, limit: Int) throws -> [(time: Date, value: String)] {
        try store.points(user: user, room: room, sensor: sensor, since: since, limit: limit)
    }
}
