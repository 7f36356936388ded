import Foundation

/// A user an admin makes or changes through the API (README, "Admins and unbound devices"): the
/// username, the password (hashed with argon2id before it is kept) and the admin flag.
public struct UserDraft: Sendable, Equatable {
    public var username: String?
    public var password: String?
    public var isAdmin: Bool?

    public init(username: String? = nil, password: String? = nil, isAdmin: Bool? = nil) {
        self.username = username
        self.password = password
        self.isAdmin = isAdmin
    }

    public static let maxUsernameBytes = 64
    public static let minPasswordCharacters = 8
    /// How many users the API may make, beside the config's.
    public static let maxUsers = 100

    /// `POST`: `{"username","password","admin"?}`; `PUT` (`creating: false`): `{"password"?,"admin"?}`,
    /// at least one. Every problem named with its field, in one message.
    public static func parse(_ bytes: [UInt8], creating: Bool) -> Result<UserDraft, APIBody.Problem> {
        let fields: [String: Any]
        switch APIBody.object(bytes) {
        case .success(let parsed): fields = parsed
        case .failure(let problem): return .failure(problem)
        }
        let known = creating ? ["username", "password", "admin"] : ["password", "admin"]
        var problems = fields.keys.sorted().filter { !known.contains($0) }.map {
            "field \"\($0)\" is not known (expected \(known.joined(separator: ", ")))"
        }
        var draft = UserDraft()
        if creating || fields["username"] != nil {
            switch APIBody.string(fields, "username") {
            case .failure(let problem): problems.append(problem.message)
            case .success(let name):
                if name.utf8.count > maxUsernameBytes {
                    problems.append("field \"username\" is too long (at most \(maxUsernameBytes) bytes of UTF-8)")
                } else if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == " " })
                    || name.trimmingCharacters(in: .whitespacesAndNewlines) != name {
                    problems.append("field \"username\" must not contain spaces or control characters")
                } else {
                    draft.username = name
                }
            }
        }
        if creating || fields["password"] != nil {
            switch APIBody.string(fields, "password") {
            case .failure(let problem): problems.append(problem.message)
            case .success(let password) where password.count < minPasswordCharacters:
                problems.append("field \"password\" must be at least \(minPasswordCharacters) characters")
            case .success(let password): draft.password = password
            }
        }
        if let value = fields["admin"] {
            if let number = value as? NSNumber, JSONBoolean.isBoolean(number) {
                draft.isAdmin = number.boolValue
            } else {
                problems.append("field \"admin\" must be true or false")
            }
        }
        if !creating, problems.isEmpty, draft.password == nil, draft.isAdmin == nil {
            problems.append("nothing to change: give \"password\" or \"admin\"")
        }
        guard problems.isEmpty else { return .failure(APIBody.Problem(problems.joined(separator: "; "))) }
        return .success(draft)
    }
}

/// Users made through the API, as the routes see them; the runtime keeps them in the database.
public struct UserServices: Sendable {
    public enum Outcome: Sendable, Equatable {
        case done(User)
        /// Refused with 409 and this message (a username taken, too many users).
        case conflict(String)
        /// No API user by that id.
        case notFound
    }

    /// Whether the API made this user (and so may change or remove it).
    public var isManaged: @Sendable (_ id: String) -> Bool
    public var create: @Sendable (UserDraft) throws -> Outcome
    public var update: @Sendable (_ id: String, UserDraft) throws -> Outcome
    public var delete: @Sendable (_ id: String) throws -> Outcome

    public init(isManaged: @escaping @Sendable (String) -> Bool,
                create: @escaping @Sendable (UserDraft) throws -> Outcome,
                update: @escaping @Sendable (String, UserDraft) throws -> Outcome,
                delete: @escaping @Sendable (String) throws -> Outcome) {
        self.isManaged = isManaged
        self.create = create
        self.update = update
        self.delete = delete
    }
}
