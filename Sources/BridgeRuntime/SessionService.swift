import BridgeCore
import BridgeCrypto
import BridgeStorage
import Foundation
import Synchronization

/// API sessions as signed tokens: any instance with the same key accepts a token, whichever issued
/// it, so a load balancer can send a user anywhere. The key comes from `cluster.secret`, or without
/// one from a random key kept in the database. Logging out records a revocation (id and expiry) in
/// the database and in memory; checking a token reads only memory, except on a database other
/// instances share (PostgreSQL, docs/scaling.md), where their logouts are read from the database.
public final class SessionService: Sendable {
    /// Told of every logout on this instance, so the runtime can pass it to the other instances.
    public typealias RevocationHandler = @Sendable (SessionRevocation) -> Void

    /// The `settings` key of the generated signing key, used only without `cluster.secret`.
    static let keySetting = "session_key"

    let signer: SessionSigner
    private let ttl: Double
    private let store: RevocationStore
    private let revoked: Mutex<RevokedSessions>
    private let handler = Mutex<RevocationHandler?>(nil)
    /// Tokens whose signature was already checked, with their claims: a client sends the same
    /// token with every request, and the key never changes while the bridge runs. Emptied when
    /// full, so it stays bounded.
    private let verified = Mutex<[String: Verified]>([:])
    private static let verifiedCapacity = 4096
    /// Counts what can end a token that checked out: revocations, accounts changed, logouts
    /// everywhere. Counted after each such change is made.
    private let changes = Atomic<UInt64>(0)

    /// A token's claims and, once it checked out, its session and the `changes` count read before
    /// that check: while the count is the same, nothing that could end the token has happened, and
    /// only its expiry is checked again (docs/performance.md, "Prepared responses"). Not kept for
    /// guests' tokens, nor on a shared database, whose revocations are read from it every time.
    /// A class, so that the cache hands out one reference rather than a copy of every field.
    private final class Verified: Sendable {
        let claims: SessionClaims
        let session: SessionServices.Session?
        let checkedAt: UInt64

        init(claims: SessionClaims, session: SessionServices.Session? = nil, checkedAt: UInt64 = 0) {
            self.claims = claims
            self.session = session
            self.checkedAt = checkedAt
        }
    }
    private let closeStreams: @Sendable (_ sessionID: String) -> Void
    private let closeUserStreams: @Sendable (_ userID: String) -> Void
    /// The configured users by id: what a token's binding is checked against.
    /// Changes when an admin adds, changes or removes a user through the API (`setAccount`), and
    /// with a reload (`usersChanged`).
    let accounts: Mutex<[String: User]>
    /// Each user's current binding (`SessionClaims.binding`), made on first use.
    private let bindings = Mutex<[String: [UInt8]]>([:])
    private let settings: SettingsStore
    /// The database is PostgreSQL, which other instances may share: revocations and logouts
    /// everywhere made there are read from it on every check, not only from memory.
    private let shared: Bool
    let logger: Logger
    let now: @Sendable () -> Date
    /// Unexpired guests by id (README, "Guests"), as in the database: a guest token is checked
    /// against this, never the database.
    let guests: Mutex<[String: Guest]>
    let guestStore: GuestStore

    /// Loads the revocations still in force, deleting the expired ones.
    /// - Parameters:
    ///   - ttl: seconds a new token lives (rounded up to a whole second).
    ///   - users: the configured users; a token is good only while its user's id, username and
    ///     password hash are what they were at login (README "Sessions").
    ///   - closeStreams: ends the event streams a revoked session opened.
    ///   - closeUserStreams: ends every event stream of a user (log out everywhere).
    ///   - now: the wall clock, which expiries are in.
    public init(
        signer: SessionSigner, ttl: Double, database: Database, logger: Logger, users: [User] = [],
        closeStreams: @escaping @Sendable (_ sessionID: String) -> Void = { _ in },
        closeUserStreams: @escaping @Sendable (_ userID: String) -> Void = { _ in },
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(StorageError) {
        self.signer = signer
        self.ttl = ttl
        self.logger = logger
        self.closeStreams = closeStreams
        self.closeUserStreams = closeUserStreams
        accounts = Mutex(Dictionary(users.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }))
        settings = SettingsStore(database: database)
        shared = database.url.isPostgres
        self.now = now
        store = RevocationStore(database: database)
        let seconds = Int64(now().timeIntervalSince1970)
        let purged = try store.purgeExpired(now: seconds)
        if purged > 0 { logger.info("removed expired session revocations", ["count": String(purged)]) }
        var list = RevokedSessions()
        for entry in try store.live(now: seconds) {
            list.insert(SessionRevocation(id: entry.id, expiresAt: entry.expiresAt), now: Double(seconds))
        }
        revoked = Mutex(list)
        guestStore = GuestStore(database: database)
        try guestStore.purgeExpired(now: seconds)
        guests = Mutex(Dictionary(try guestStore.live(now: seconds).map { ($0.id, $0) },
                                  uniquingKeysWith: { first, _ in first }))
    }

    convenience init(configuration: BridgeConfiguration, database: Database, events: EventHub,
                     logger: Logger) throws {
        let signer = try SessionService.signer(secret: configuration.cluster.secret, database: database)
        try self.init(signer: signer, ttl: configuration.http.sessionTTL, database: database, logger: logger,
                      users: configuration.users,
                      closeStreams: { session in events.close(session: session) },
                      closeUserStreams: { user in events.close(user: user) })
    }

    /// The key from `secret` when there is one; otherwise this database's key, made on first use
    /// (so that tokens outlive restarts of a single instance).
    public static func signer(secret: String?, database: Database) throws -> SessionSigner {
        if let secret { return SessionSigner(secret: secret) }
        let text = try SettingsStore(database: database).value(of: keySetting) {
            SessionClaims.hex(SessionSigner.randomKey())
        }
        guard let key = SessionService.bytes(hex: text), let signer = SessionSigner(key: key) else {
            throw RuntimeError("the session key in \(database.url) is damaged (settings.\(keySetting))")
        }
        return signer
    }

    /// What the routes call.
    public var services: SessionServices {
        SessionServices(
            create: { [self] userID in try issue(userID: userID) },
            resolve: { [self] token in try session(of: token) },
            revoke: { [self] token in try self.revoke(token: token) },
            revokeAll: { [self] userID in try self.revokeAll(userID: userID) }
        )
    }

    /// What the guest routes call.
    public var guestServices: GuestServices {
        GuestServices(
            create: { [self] userID, draft in try createGuest(userID: userID, draft) },
            list: { [self] userID in guestList(userID: userID) },
            revoke: { [self] userID, id in try revokeGuest(userID: userID, id: id) }
        )
    }

    /// Sets the handler told of each logout made on this instance (not of `revokeRemote` calls).
    /// It runs on the logout request's thread after the revocation is stored, so it should hand the
    /// revocation off (e.g. queue an MQTT publish) rather than wait.
    public func onRevoke(_ handler: @escaping RevocationHandler) {
        self.handler.withLock { $0 = handler }
    }

    /// Records a revocation made on another instance: the token stops working here too, and its
    /// event streams here end.
    /// - Returns: whether it was news (false for a repeat, an expired token or a malformed id).
    @discardableResult
    public func revokeRemote(id: String, expiresAt: Int64) throws(StorageError) -> Bool {
        let revocation = SessionRevocation(id: id, expiresAt: expiresAt)
        guard revocation.hasValidID, Double(expiresAt) > now().timeIntervalSince1970 else { return false }
        guard !revoked.withLock({ $0.contains(id: id) }) else { return false }
        try record(revocation)
        return true
    }

    private func issue(userID: String) throws -> String {
        let expiry = Int64((now().timeIntervalSince1970 + ttl).rounded(.up))
        let claims = SessionClaims(id: SessionToken.randomBytes(SessionClaims.idBytes), userID: userID,
                                   expiresAt: expiry, binding: try binding(of: userID))
        return signer.sign(claims.payload)
    }

    private func session(of token: String) throws -> SessionServices.Session? {
        let seen = changes.load(ordering: .acquiring)
        guard let known = verifiedEntry(of: token), !known.claims.isExpired(atUnixSeconds: now().timeIntervalSince1970)
        else { return nil }
        if let session = known.session, known.checkedAt == seen { return session }
        let claims = known.claims
        guard !revoked.withLock({ $0.contains(id: claims.idText) }),
              try !shared || !store.isRevoked(id: claims.idText, now: Int64(now().timeIntervalSince1970))
        else { return nil }
        if claims.isGuest { return guestSession(claims) }
        guard try claims.binding == binding(of: claims.userID) else { return nil }
        let session = SessionServices.Session(userID: claims.userID, id: claims.idText, expiresAt: claims.expiresAt)
        if !shared {
            let checked = Verified(claims: claims, session: session, checkedAt: seen)
            verified.withLock { verified in
                guard verified[token] != nil else { return }
                verified[token] = checked
            }
        }
        return session
    }

    /// The account as it is now, as a token carries it: a keyed digest of the user's id, username and
    /// password hash and of the times the user logged out everywhere (kept in the database's settings).
    /// Made and cached under the cache's lock, so a logout everywhere can't be undone by a stale entry.
    private func binding(of userID: String) throws -> [UInt8] {
        try bindings.withLock { (cache: inout [String: [UInt8]]) throws(StorageError) -> [UInt8] in
            if !shared, let known = cache[userID] { return known }
            let generation = try settings.value(of: Self.generationKey(userID)) ?? "0"
            let account = accounts.withLock { $0[userID] }
            let parts = ["account v1", userID, account?.username ?? "", account?.passwordHash ?? "", generation]
            let digest = signer.digest(Array(parts.joined(separator: "\u{0}").utf8), count: SessionClaims.bindingBytes)
            cache[userID] = digest
            return digest
        }
    }

    /// A user added, changed (`nil` hash: unchanged) or removed (`user` nil) through the API: tokens
    /// are checked against the account as it is now, so a changed password ends the old tokens.
    func setAccount(id: String, to user: User?) {
        changeAccounts { accounts, cache in
            accounts[id] = user
            cache[id] = nil
        }
    }

    /// The users changed (a reload, README "Managing the home"): tokens are checked against them
    /// from now on, so a changed password or username ends the user's tokens, and a new user's work.
    func usersChanged(_ users: [User]) {
        let new = Dictionary(users.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        changeAccounts { accounts, cache in
            accounts = new
            cache.removeAll()
        }
    }

    /// Changes the accounts and the bindings made from them under both locks, so no binding of an
    /// old account outlives the change.
    private func changeAccounts(_ change: (inout [String: User], inout [String: [UInt8]]) -> Void) {
        bindings.withLock { cache in
            accounts.withLock { change(&$0, &cache) }
        }
        changes.add(1, ordering: .releasing)
    }

    private static func generationKey(_ userID: String) -> String { "session_generation:" + userID }

    /// Ends every session of a user, here and after restarts: the user's generation goes up, which
    /// changes the binding every one of its tokens carries; its event streams end at once.
    func revokeAll(userID: String) throws {
        let key = Self.generationKey(userID)
        do {
            try bindings.withLock { (cache: inout [String: [UInt8]]) throws(StorageError) in
                let next = (Int(try settings.value(of: key) ?? "0") ?? 0) + 1
                try settings.set(key, to: String(next))
                cache[userID] = nil
            }
            changes.add(1, ordering: .releasing)
        } catch {
            logger.error("cannot store a logout everywhere", ["error": "\(error)"])
            throw error
        }
        // Guests' tokens don't carry the generation: the user's guests go with the rest.
        try revokeAllGuests(userID: userID)
        closeUserStreams(userID)
    }

    private func revoke(token: String) throws {
        // The route has just resolved the token; one that no longer checks out has nothing to end.
        guard let claims = claims(of: token) else { return }
        // A guest logging out ends the guest (README, "Guests").
        if claims.isGuest {
            _ = try revokeGuest(userID: claims.userID, id: claims.idText)
            return
        }
        let revocation = SessionRevocation(id: claims.idText, expiresAt: claims.expiresAt)
        do {
            try record(revocation)
        } catch {
            logger.error("cannot store a session revocation", ["error": "\(error)"])
            throw error
        }
        handler.withLock { $0 }?(revocation)
    }

    /// Stored first, so a revocation answered with 204 survives a crash; then in memory.
    func record(_ revocation: SessionRevocation) throws(StorageError) {
        try store.add(id: revocation.id, expiresAt: revocation.expiresAt)
        revoked.withLock { _ = $0.insert(revocation, now: now().timeIntervalSince1970) }
        changes.add(1, ordering: .releasing)
        closeStreams(revocation.id)
    }

    func claims(of token: String) -> SessionClaims? {
        verifiedEntry(of: token)?.claims
    }

    private func verifiedEntry(of token: String) -> Verified? {
        if let known = verified.withLock({ $0[token] }) { return known }
        guard let claims = signer.verify(token).flatMap(SessionClaims.init(payload:)) else { return nil }
        let entry = Verified(claims: claims)
        verified.withLock { verified in
            if verified.count >= Self.verifiedCapacity { verified.removeAll(keepingCapacity: true) }
            verified[token] = entry
        }
        return entry
    }

    static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }
}
