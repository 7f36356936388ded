import Foundation

/// A guest of a user (README, "Guests"): a token that sees only some of the user's rooms, may switch
/// their lights or only read them, until a time. Kept in the database; the token is signed like any
/// session token and names the guest, so deleting the guest ends it at once.
public struct Guest: Sendable, Equatable {
    public enum Access: String, Sendable, CaseIterable {
        /// Rooms, their history and their live events.
        case read
        /// That, and switching the lights of those rooms.
        case control
    }

    /// `SessionClaims.idText` of the guest's token: 32 lowercase hex digits.
    public var id: String
    /// The user whose rooms these are.
    public var userID: String
    /// Room ids, each one of the user's rooms, in the order given.
    public var rooms: [String]
    public var access: Access
    /// Unix seconds; the guest's token is dead from this second on.
    public var expiresAt: Int64

    public init(id: String, userID: String, rooms: [String], access: Access, expiresAt: Int64) {
        self.id = id
        self.userID = userID
        self.rooms = rooms
        self.access = access
        self.expiresAt = expiresAt
    }

    /// How many unexpired guests one user may have at once.
    public static let maxPerUser = 20
    /// How many rooms one guest may see.
    public static let maxRooms = 16
    /// The furthest a guest's expiry may be from its creation: 30 days.
    public static let maxLifetimeSeconds: Int64 = 30 * 24 * 3600

    public func sees(room id: String) -> Bool {
        rooms.contains(id)
    }

    /// The user as this guest sees it: only the guest's rooms, no groups (a group may span rooms it
    /// does not see), no notification targets.
    public func view(of user: User) -> User {
        var visible = user
        visible.rooms = user.rooms.filter { sees(room: $0.id) }
        visible.groups = []
        visible.notify = []
        return visible
    }

    /// The API's shape: `{"id","rooms","access","expires"}` and, when given, the token.
    public func json(token: String?) -> JSONValue {
        var members: [(String, JSONValue)] = [("id", .string(id))]
        if let token { members.append(("token", .string(token))) }
        members += [
            ("rooms", .strings(rooms)), ("access", .string(access.rawValue)),
            ("expires", .string(Timestamp.iso8601(Date(timeIntervalSince1970: Double(expiresAt))))),
        ]
        return .object(members)
    }
}

/// What `POST /api/v1/guests` asks for, checked against the user's rooms and the bounds.
public struct GuestDraft: Sendable, Equatable {
    public var rooms: [String]
    public var access: Guest.Access
    public var expiresAt: Int64

    public init(rooms: [String], access: Guest.Access, expiresAt: Int64) {
        self.rooms = rooms
        self.access = access
        self.expiresAt = expiresAt
    }

    /// Parses `{"rooms":[...],"access":"read"|"control","expires":"<ISO 8601>"}`. Every problem is
    /// named with its field, all of them in one message.
    public static func parse(_ bytes: [UInt8], user: User, now: Date) -> Result<GuestDraft, APIBody.Problem> {
        let fields: [String: Any]
        switch APIBody.object(bytes) {
        case .success(let parsed): fields = parsed
        case .failure(let problem): return .failure(problem)
        }
        var problems: [String] = []
        for name in fields.keys.sorted() where !["rooms", "access", "expires"].contains(name) {
            problems.append("field \"\(name)\" is not known (expected rooms, access, expires)")
        }
        let rooms = parseRooms(fields["rooms"], user: user, problems: &problems)
        var access = Guest.Access.read
        switch APIBody.string(fields, "access") {
        case .failure(let problem): problems.append(problem.message)
        case .success(let word):
            if let parsed = Guest.Access(rawValue: word) {
                access = parsed
            } else {
                problems.append("field \"access\" must be \"read\" or \"control\"")
            }
        }
        var expiresAt: Int64 = 0
        switch APIBody.string(fields, "expires") {
        case .failure(let problem): problems.append(problem.message)
        case .success(let text):
            if let date = Alarm.parseDate(text) {
                expiresAt = Int64(date.timeIntervalSince1970.rounded(.up))
                let start = Int64(now.timeIntervalSince1970)
                if expiresAt <= start {
                    problems.append("field \"expires\" must be in the future")
                } else if expiresAt - start > Guest.maxLifetimeSeconds {
                    problems.append("field \"expires\" must be at most 30 days from now")
                }
            } else {
                problems.append("field \"expires\" must be an ISO 8601 date and time, e.g. 2026-12-24T18:00:00Z")
            }
        }
        guard problems.isEmpty else { return .failure(APIBody.Problem(problems.joined(separator: "; "))) }
        return .success(GuestDraft(rooms: rooms, access: access, expiresAt: expiresAt))
    }

    /// The room ids for `rooms`: each one of the user's rooms (by id or name), no repeats, 1 to `maxRooms`.
    private static func parseRooms(_ value: Any?, user: User, problems: inout [String]) -> [String] {
        guard let value, !(value is NSNull) else {
            problems.append("field \"rooms\" is required")
            return []
        }
        guard let names = value as? [Any] else {
            problems.append("field \"rooms\" must be an array of room names")
            return []
        }
        guard !names.isEmpty, names.count <= Guest.maxRooms else {
            problems.append("field \"rooms\" must name 1 to \(Guest.maxRooms) rooms")
            return []
        }
        var ids: [String] = []
        for (index, element) in names.enumerated() {
            guard let name = element as? String, !name.isEmpty, name.utf8.count <= APIBody.maxStringBytes else {
                problems.append("field \"rooms[\(index)]\" must be a room name")
                continue
            }
            // Another user's room and a missing one look the same, as everywhere in the API.
            guard let room = user.room(named: name) else {
                problems.append("field \"rooms[\(index)]\": no room \"\(name.replacingOccurrences(of: "\u{0}", with: ""))\"")
                continue
            }
            if ids.contains(room.id) {
                problems.append("field \"rooms[\(index)]\": \"\(room.id)\" is named twice")
            } else {
                ids.append(room.id)
            }
        }
        return ids
    }
}

/// Guests as the routes see them; the runtime keeps them in the database beside the sessions.
public struct GuestServices: Sendable {
    /// What creating a guest came to.
    public enum Creation: Sendable {
        case created(Guest, token: String)
        /// The user has `Guest.maxPerUser` unexpired guests already.
        case tooMany
    }

    public var create: @Sendable (_ userID: String, GuestDraft) throws -> Creation
    /// The user's unexpired guests, each with its token (the owner may hand it out again).
    public var list: @Sendable (_ userID: String) throws -> [(guest: Guest, token: String)]
    /// Deletes one of the user's guests, ending its token and streams; false if it has none by that id.
    public var revoke: @Sendable (_ userID: String, _ id: String) throws -> Bool

    public init(create: @escaping @Sendable (String, GuestDraft) throws -> Creation,
                list: @escaping @Sendable (String) throws -> [(guest: Guest, token: String)],
                revoke: @escaping @Sendable (String, String) throws -> Bool) {
        self.create = create
        self.list = list
        self.revoke = revoke
    }
}
