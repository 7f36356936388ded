import BridgeCore
import BridgeCrypto
import BridgeRuntime
import BridgeStorage
import Foundation
import Synchronization
import Testing

/// Signed session tokens with real libsodium, and the session service over real SQLite files.
@Suite struct SessionTokenTests {
    static let secret = "a-shared-cluster-secret-of-32-characters-or-more"
    let claims = SessionClaims(id: Array(repeating: 7, count: 16), userID: "1", expiresAt: 4_000_000_000)

    /// What a callback was given, in order.
    final class Recorder<Value: Sendable>: Sendable {
        private let values = Mutex<[Value]>([])
        func record(_ value: Value) { values.withLock { $0.append(value) } }
        var all: [Value] { values.withLock { $0 } }
    }

    /// A wall clock the test moves.
    final class Clock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func advance(_ seconds: Double) { now.withLock { $0 += seconds } }
        var read: @Sendable () -> Date { { [self] in now.withLock { $0 } } }
    }

    static func database(_ folder: URL, _ name: String) throws -> Database {
        try Database(path: folder.appendingPathComponent(name).path)
    }

    static func service(_ database: Database, secret: String? = SessionTokenTests.secret, clock: Clock = Clock(),
                        ttl: Double = 60, closed: Recorder<String>? = nil) throws -> SessionService {
        try SessionService(signer: SessionService.signer(secret: secret, database: database), ttl: ttl,
                           database: database, logger: Logger(level: .error),
                           closeStreams: { id in closed?.record(id) }, now: clock.read)
    }

    /// A token is bound to the account it was issued for: a password change or the user id given to another
    /// user (across a restart, on the same database and key) ends it; "log out everywhere" ends all of a user's.
    @Test func tokensAreBoundToTheAccount() throws {
        let folder = try TestFiles.makeDirectory("session-binding")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = try Self.database(folder, "a.sqlite")
        func service(_ users: [User], closedUsers: Recorder<String>? = nil) throws -> SessionService {
            try SessionService(signer: SessionService.signer(secret: Self.secret, database: database), ttl: 60,
                               database: database, logger: Logger(level: .error), users: users,
                               closeUserStreams: { closedUsers?.record($0) })
        }
        let ayse = User(id: "2", username: "Ayse", passwordHash: "$argon2id$first", rooms: [])
        let first = try service([ayse]).services
        let token = try first.create("2")
        #expect(try first.resolve(token)?.userID == "2")
        #expect(try service([ayse]).services.resolve(token)?.userID == "2", "a restart alone changes nothing")

        var changed = ayse
        changed.passwordHash = "$argon2id$second"
        #expect(try service([changed]).services.resolve(token) == nil, "the password changed")
        let stranger = User(id: "2", username: "Zeynep", passwordHash: "$argon2id$first", rooms: [])
        #expect(try service([stranger]).services.resolve(token) == nil, "id 2 is someone else now")

        let closed = Recorder<String>()
        let current = try service([ayse], closedUsers: closed).services
        let other = try current.create("2")
        let bob = try current.create("1")
        try current.revokeAll("2")
        #expect(try current.resolve(token) == nil)
        #expect(try current.resolve(other) == nil)
        #expect(try current.resolve(bob)?.userID == "1", "another user's sessions stay")
        #expect(closed.all == ["2"], "the user's event streams end")
        #expect(try service([ayse]).services.resolve(other) == nil, "and after a restart")
        #expect(try current.resolve(try current.create("2"))?.userID == "2", "a new login works")
    }

    @Test func aSignedTokenVerifiesOnlyIntact() throws {
        let signer = SessionSigner(secret: Self.secret)
        let token = signer.sign(claims.payload)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 2)
        #expect(token.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) }, "URL-safe: \(token)")
        #expect(signer.verify(token).flatMap(SessionClaims.init(payload:)) == claims)

        // Tampered payload: the same claims for user 2, carrying user 1's MAC.
        let other = SessionClaims(id: claims.id, userID: "2", expiresAt: claims.expiresAt)
        let otherPayload = String(signer.sign(other.payload).split(separator: ".")[0])
        #expect(signer.verify(otherPayload + "." + parts[1]) == nil, "another user's payload with this MAC")
        #expect(signer.verify(parts[0] + "." + String(signer.sign(other.payload).split(separator: ".")[1])) == nil,
                "this payload with another user's MAC")
        var flipped = Array(parts[0])
        flipped[5] = flipped[5] == "A" ? "B" : "A"
        #expect(signer.verify(String(flipped) + "." + parts[1]) == nil, "one payload character changed")
        #expect(SessionSigner(secret: Self.secret + "!").verify(token) == nil, "another secret")
        #expect(SessionSigner(key: SessionSigner.randomKey())!.verify(token) == nil, "a random key")
        #expect(SessionSigner(secret: Self.secret).verify(token) != nil, "the same secret elsewhere")
    }

    @Test func garbageIsRejectedWithoutCrashing() {
        let signer = SessionSigner(secret: Self.secret)
        let token = signer.sign(claims.payload)
        let parts = token.split(separator: ".").map(String.init)
        let garbage = ["", ".", "x", "x.y", "...", token + ".", "." + token, parts[0], parts[0] + ".",
                       parts[0] + "." + parts[1] + "A", parts[0] + "=." + parts[1], parts[0] + ".+" + parts[1],
                       "\u{00e9}" + token, String(repeating: "A", count: 2000) + "." + parts[1],
                       parts[0] + "." + String(parts[1].dropLast(2))]
        for text in garbage {
            #expect(signer.verify(text) == nil, "\(text)")
        }
        #expect(SessionSigner(key: [1, 2, 3]) == nil, "a key of the wrong size")
    }

    @Test func expiredAndRevokedTokensAreRefused() throws {
        let folder = try TestFiles.makeDirectory("session-service")
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = Clock()
        let closed = Recorder<String>()
        let service = try Self.service(try Self.database(folder, "a.sqlite"), clock: clock, closed: closed)
        let sessions = service.services
        let token = try sessions.create("1")
        #expect(try sessions.resolve(token)?.userID == "1")
        #expect(try sessions.resolve(token.replacingOccurrences(of: ".", with: "..")) == nil)
        clock.advance(59)
        #expect(try sessions.resolve(token)?.userID == "1")
        clock.advance(2)
        #expect(try sessions.resolve(token) == nil, "expired")

        let revocations = Recorder<SessionRevocation>()
        service.onRevoke { revocation in revocations.record(revocation) }
        let loggedOut = try sessions.create("2")
        let kept = try sessions.create("2")
        try sessions.revoke(loggedOut)
        #expect(try sessions.resolve(loggedOut) == nil)
        #expect(try sessions.resolve(kept)?.userID == "2", "only that session ends")
        let told = try #require(revocations.all.first)
        #expect(revocations.all.count == 1)
        #expect(told.hasValidID)
        #expect(told.expiresAt == Int64(clock.read().timeIntervalSince1970) + 60)
        #expect(closed.all == [told.id], "the session's event streams are closed")
    }

    /// Two instances with the same secret and their own databases, as on two machines.
    @Test func aTokenWorksOnEveryInstanceUntilARevocationReachesIt() throws {
        let folder = try TestFiles.makeDirectory("session-cluster")
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = Clock()
        let first = try Self.service(try Self.database(folder, "a.sqlite"), clock: clock)
        let closedOnSecond = Recorder<String>()
        var second = try Self.service(try Self.database(folder, "b.sqlite"), clock: clock, closed: closedOnSecond)
        let stranger = try Self.service(try Self.database(folder, "c.sqlite"),
                                        secret: String(repeating: "z", count: 40), clock: clock)
        let broadcast = Recorder<SessionRevocation>()
        first.onRevoke { revocation in broadcast.record(revocation) }

        let token = try first.services.create("1")
        #expect(try second.services.resolve(token)?.userID == "1")
        #expect(try stranger.services.resolve(token) == nil, "another secret")

        try first.services.revoke(token)
        #expect(try first.services.resolve(token) == nil)
        #expect(try second.services.resolve(token)?.userID == "1", "the second instance has not been told yet")
        let revocation = try #require(broadcast.all.first)
        #expect(try second.revokeRemote(id: revocation.id, expiresAt: revocation.expiresAt))
        #expect(try second.services.resolve(token) == nil)
        #expect(closedOnSecond.all == [revocation.id])
        #expect(try !second.revokeRemote(id: revocation.id, expiresAt: revocation.expiresAt), "a repeat")
        #expect(try !second.revokeRemote(id: "not-an-id", expiresAt: revocation.expiresAt))
        #expect(broadcast.all == [revocation], "remote revocations are not broadcast again")

        // The second instance restarts: the remote revocation was stored.
        second = try Self.service(try Self.database(folder, "b.sqlite"), clock: clock)
        #expect(try second.services.resolve(token) == nil)
        #expect(try second.services.resolve(try first.services.create("1"))?.userID == "1")
    }

    @Test func withoutASecretTheKeyIsTheDatabasesAndOutlivesARestart() throws {
        let folder = try TestFiles.makeDirectory("session-key")
        defer { try? FileManager.default.removeItem(at: folder) }
        let token = try Self.service(try Self.database(folder, "a.sqlite"), secret: nil).services.create("1")
        let reopened = try Self.service(try Self.database(folder, "a.sqlite"), secret: nil)
        #expect(try reopened.services.resolve(token)?.userID == "1")
        let elsewhere = try Self.service(try Self.database(folder, "b.sqlite"), secret: nil)
        #expect(try elsewhere.services.resolve(token) == nil, "another database has another key")
        let stored = try Self.database(folder, "a.sqlite").query("SELECT key FROM settings").compactMap(\.first?.text)
        #expect(stored == ["session_key"])
    }

    @Test func expiredRevocationsArePurgedAtStart() throws {
        let folder = try TestFiles.makeDirectory("session-purge")
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = Clock()
        let database = try Self.database(folder, "a.sqlite")
        let service = try Self.service(database, clock: clock, ttl: 10)
        try service.services.revoke(try service.services.create("1"))
        let count = { try database.query("SELECT count(*) FROM revoked_sessions").first?.first?.integer }
        #expect(try count() == 1)
        clock.advance(11)
        _ = try Self.service(database, clock: clock)
        #expect(try count() == 0)
    }
}
