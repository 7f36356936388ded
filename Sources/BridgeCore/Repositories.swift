import Foundation

/// Alarms as the routes see them; the runtime backs this with the database. Every call names the
/// owner, so no route can reach another user's alarm.
public protocol AlarmRepository: Sendable {
    func alarms(userID: String) throws -> [Alarm]
    func alarm(uuid: String, userID: String) throws -> Alarm?
    func create(_ alarm: Alarm) throws
    /// Returns false when the user has no alarm with that uuid.
    func update(_ alarm: Alarm) throws -> Bool
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
