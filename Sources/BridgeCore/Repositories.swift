import Foundation

/// Alarms as the routes see them; the runtime backs this with the database. Every call names the
/// owner, so no route can reach another user's alarm.
public protocol AlarmRepository: Sendable {
    func alarms(userID: String) throws -> [Alarm]
    func alarm(uuid: String, userID: String) throws -> Alarm?
    /// Stores a new alarm unless the user has `maxPerUser` already (checked and inserted at once);
    /// returns false when the cap was reached.
    func create(_ alarm: Alarm, maxPerUser: Int) throws -> Bool
    /// Returns false when the user has no alarm with that uuid.
    func update(_ alarm: Alarm) throws -> Bool
    func delete(uuid: String, userID: String) throws -> Bool
}

/// Watchdogs with their episodes' state, as the routes see them; every call names the owner.
public protocol WatchdogRepository: Sendable {
    func watchdogs(userID: String) throws -> [(Watchdog, WatchdogState)]
    func watchdog(uuid: String, userID: String) throws -> (Watchdog, WatchdogState)?
    func count(userID: String) throws -> Int
    /// Stores a new watchdog; returns its state (armed now).
    func create(_ watchdog: Watchdog) throws -> WatchdogState
    /// Replaces the fields and starts a new episode; `nil` when the user has no such watchdog.
    func update(_ watchdog: Watchdog) throws -> WatchdogState?
    func delete(uuid: String, userID: String) throws -> Bool
}

/// Recorded readings as the history route sees them.
public protocol HistoryRepository: Sendable {
    /// Readings at or after `since`, oldest first, at most `limit`.
    func points(user: String, room: String, sensor: String, since: Date, limit: Int) throws -> [(time: Date, value: String)]
}

/// Thrown by a repository whose data is held by another bridge instance that did not answer in
/// time (cluster); the routes answer 504 with its message.
public struct RemoteTimeout: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Rooms made while the bridge runs (README, "Managing the home"), as the routes and the MQTT
/// requests see them: each change is checked, stored and applied at once, or refused whole.
/// `fields` is the parsed JSON body.
public protocol RoomManagement: Sendable {
    func create(user: String, _ fields: [String: Any]) -> Result<Room, RoomChangeFailure>
    func update(user: String, room: String, _ fields: [String: Any]) -> Result<Room, RoomChangeFailure>
    func bind(user: String, room: String, sensor: Any) -> Result<Room, RoomChangeFailure>
    func delete(user: String, room: String) -> Result<Void, RoomChangeFailure>
    /// The user's rooms made through the API, as stored (for `GET /api/v1/rooms?detail=1`).
    func managedRooms(user: String) -> [ManagedRoom]
}
