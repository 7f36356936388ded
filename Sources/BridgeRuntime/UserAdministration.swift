import BridgeCore
import BridgeCrypto
import BridgeStorage
import Foundation
import Synchronization

/// Users an admin makes through the API (README, "Admins and unbound devices"): kept in the
/// database with an argon2id hash, added to the home at start and at once when made, so they can
/// log in; their rooms are made through the API too (`RoomManager`, which applies every change of
/// users to the home). The config's users are never changed here.
final class UserAdministration: Sendable {
    private let store: UserStore
    private let home: HomeStore
    private let rooms: RoomManager
    private let sessions: SessionService
    private let logger: Logger
    /// The ids the API made, under one lock with every change, so two requests can't both take a name.
    private let managed: Mutex<Set<String>>

    /// The API's users in the database that can be added beside `configured`: one whose id or
    /// username a config user has is left out, with a warning (the config wins).
    static func load(_ database: Database, configured: [User], logger: Logger) throws -> [User] {
        try UserStore(database: database).all().filter { user in
            let clash = configured.contains { $0.id == user.id || $0.username == user.username }
            if clash {
                logger.warning("a user made through the API has the id or username of a config user; left out",
                               ["id": user.id, "username": user.username])
            }
            return !clash
        }
    }

    init(database: Database, home: HomeStore, rooms: RoomManager, sessions: SessionService, apiUsers: [User],
         logger: Logger) {
        store = UserStore(database: database)
        self.home = home
        self.rooms = rooms
        self.sessions = sessions
        self.logger = logger
        managed = Mutex(Set(apiUsers.map(\.id)))
    }

    var services: UserServices {
        UserServices(
            isManaged: { [self] id in managed.withLock { $0.contains(id) } },
            create: { [self] draft in try create(draft) },
            update: { [self] id, draft in try update(id, draft) },
            delete: { [self] id in try delete(id) }
        )
    }

    private func create(_ draft: UserDraft) throws -> UserServices.Outcome {
        guard let username = draft.username, let password = draft.password else { return .notFound }
        // Hashed before the lock: argon2id takes a core and 64 MiB for a while.
        let hash = try PasswordHasher.hash(password: password)
        let user = User(id: "u" + SessionClaims.hex(SessionToken.randomBytes(6)), username: username,
                        passwordHash: hash, rooms: [], isAdmin: draft.isAdmin ?? false)
        let outcome = try managed.withLock { (ids: inout Set<String>) throws(StorageError) -> UserServices.Outcome in
            guard ids.count < UserDraft.maxUsers else {
                return .conflict("At most \(UserDraft.maxUsers) users can be made through the API; remove one first")
            }
            guard home.home.user(id: user.id) == nil else { return .conflict("The new user's id was taken; try again") }
            guard home.home.user(username: username) == nil else {
                return .conflict("field \"username\": \"\(username)\" is taken")
            }
            try store.add(user, createdAt: Int64(Date().timeIntervalSince1970))
            ids.insert(user.id)
            // A reload that read the database just now may have added it already.
            try rooms.changeUsers { $0.filter { $0.id != user.id } + [user] }
            return .done(user)
        }
        if case .done = outcome {
            sessions.setAccount(id: user.id, to: user)
            logger.info("user made through the API", ["id": user.id, "username": username])
        }
        return outcome
    }

    private func update(_ id: String, _ draft: UserDraft) throws -> UserServices.Outcome {
        let hash = try draft.password.map { password throws(PasswordHasher.Failure) in try PasswordHasher.hash(password: password) }
        let outcome = try managed.withLock { (ids: inout Set<String>) throws(StorageError) -> UserServices.Outcome in
            guard ids.contains(id), var user = home.home.user(id: id) else { return .notFound }
            let change = { (user: inout User) in
                if let hash { user.passwordHash = hash }
                if let admin = draft.isAdmin { user.isAdmin = admin }
            }
            change(&user)
            guard try store.update(user) else { return .notFound }
            // Changed as the home has it when applied, so a room change in between stays.
            try rooms.changeUsers { $0.map { var current = $0; if current.id == id { change(&current) }; return current } }
            return .done(user)
        }
        if case .done(let user) = outcome {
            // A new password ends the old tokens: they carry the old hash's binding.
            sessions.setAccount(id: id, to: user)
            logger.info("user changed through the API", ["id": id, "password": hash == nil ? "kept" : "changed",
                                                         "admin": String(user.isAdmin)])
        }
        return outcome
    }

    private func delete(_ id: String) throws -> UserServices.Outcome {
        let outcome = try managed.withLock { (ids: inout Set<String>) throws(StorageError) -> UserServices.Outcome in
            guard ids.contains(id), let user = home.home.user(id: id) else { return .notFound }
            _ = try store.delete(id: id)
            ids.remove(id)
            try rooms.changeUsers(removed: id) { $0.filter { $0.id != id } }
            return .done(user)
        }
        if case .done = outcome {
            // Its tokens, streams and guests end; a user made again later gets another id.
            try sessions.revokeAll(userID: id)
            sessions.setAccount(id: id, to: nil)
            logger.info("user removed through the API", ["id": id])
        }
        return outcome
    }
}

extension BridgeConfiguration {
    /// The configuration with `users` after the config's own.
    func adding(users: [User]) -> BridgeConfiguration {
        var copy = self
        copy.users += users
        return copy
    }
}
