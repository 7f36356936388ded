import BridgeCore
import BridgeStorage
import Foundation

/// The API's alarm repository, backed by the database.
struct DatabaseAlarms: AlarmRepository {
    let store: AlarmStore

    func alarms(userID: String) throws -> [Alarm] { try store.alarms(userID: userID) }
    func alarm(uuid: String, userID: String) throws -> Alarm? { try store.alarm(uuid: uuid, userID: userID) }
    func create(_ alarm: Alarm) throws { try store.insert(alarm, now: Date()) }
    func update(_ alarm: Alarm) throws -> Bool { try store.update(alarm, now: Date()) }
    func delete(uuid: String, userID: String) throws -> Bool { try store.delete(uuid: uuid, userID: userID) }
}

/// The API's history repository, backed by the database.
struct DatabaseHistory: HistoryRepository {
    let store: HistoryStore

    func points(user: String, room: String, sensor: String, since: Date, limit: Int) throws -> [(time: Date, value: String)] {
        try store.points(user: user, room: room, sensor: sensor, since: since, limit: limit)
    }
}
