import Foundation
@testable import BridgeCore

/// The demo's users, built in code so core tests need no file or parser.
enum Fixtures {
    static let users: [User] = [
        User(id: "1", username: "Cemalettin", passwordHash: "$argon2id$hash-1", rooms: rooms(
            ["Livingroom", "Bathroom", "Bedroom", "Kitchen", "Garden", "Saloon", "Babyroom", "Balcony"])),
        User(id: "2", username: "Mehmet", passwordHash: "$argon2id$hash-2", rooms: rooms(
            ["Garden", "Bathroom", "Bedroom", "Kitchen", "Saloon", "Livingroom", "Babyroom", "Balcony"])),
    ]

    static func rooms(_ names: [String]) -> [Room] {
        names.map { Room(id: $0.lowercased(), name: $0, sensors: Room.defaultSensors(forRoomNamed: $0)) }
    }

    /// A home with every sensor at a known value.
    static func home() -> Home {
        var home = Home(users: users)
        var simulator = Simulator(users: users, seed: 7)
        for reading in simulator.initialReadings() { home.record(reading, at: .init(timeIntervalSince1970: 0)) }
        _ = simulator.step()
        return home
    }

    /// Builds a config document the way the YAML reader would, from nested Swift literals.
    static func node(_ value: Any, line: Int = 1) -> ConfigNode {
        switch value {
        case let text as String: return .scalar(text, isQuoted: false, line: line)
        case let number as Int: return .scalar(String(number), isQuoted: false, line: line)
        case let flag as Bool: return .scalar(flag ? "true" : "false", isQuoted: false, line: line)
        case let list as [Any]: return .sequence(list.map { node($0, line: line) }, line: line)
        case let pairs as KeyValuePairs<String, Any>:
            return .mapping(pairs.map { (key: $0.key, value: node($0.value, line: line)) }, line: line)
        case let dictionary as [String: Any]:
            return .mapping(dictionary.sorted { $0.key < $1.key }.map { (key: $0.key, value: node($0.value, line: line)) },
                            line: line)
        default: return .null(line: line)
        }
    }

    static var minimalUsers: [Any] { [
        ["id": "1", "username": "Cemalettin", "password_hash": "$argon2id$v=19$x", "rooms": ["Kitchen", "Garden"]]
            as KeyValuePairs<String, Any>,
    ] }

    struct NoAlarms: AlarmRepository {
        func alarms(userID: String) throws -> [Alarm] { [] }
        func alarm(uuid: String, userID: String) throws -> Alarm? { nil }
        func create(_ alarm: Alarm, maxPerUser: Int) throws -> Bool { false }
        func update(_ alarm: Alarm) throws -> Bool { false }
        func delete(uuid: String, userID: String) throws -> Bool { false }
    }

    struct NoHistory: HistoryRepository {
        func points(user: String, room: String, sensor: String, since: Date, limit: Int) throws
            -> [(time: Date, value: String)] { [] }
    }
}
