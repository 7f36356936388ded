import BridgeCore
@testable import BridgeRuntime
import BridgeStorage
import Foundation
import Testing

/// A token that checked out is answered from memory until something that can end it happens
/// (docs/performance.md, "Prepared responses"): each such change must end it at once, over real
/// SQLite and libsodium, with the token used just before the change.
@Suite struct SessionRecheckTests {
    private let ayse = User(id: "2", username: "Ayse", passwordHash: "$argon2id$first", rooms: [])
    private let bob = User(id: "1", username: "Bob", passwordHash: "$argon2id$bob", rooms: [])

    private func service(_ folder: URL, clock: SessionTokenTests.Clock = SessionTokenTests.Clock()) throws -> SessionService {
        let database = try SessionTokenTests.database(folder, "a.sqlite")
        return try SessionService(signer: SessionService.signer(secret: SessionTokenTests.secret, database: database),
                                  ttl: 60, database: database, logger: Logger(level: .error), users: [ayse, bob],
                                  now: clock.read)
    }

    /// Resolves the token twice (the second from memory) and says whether it still checks out.
    private func works(_ sessions: SessionServices, _ token: String) throws -> Bool {
        let first = try sessions.resolve(token)
        let again = try sessions.resolve(token)
        #expect(first == again)
        return first != nil
    }

    @Test func everyChangeThatCanEndATokenEndsOneJustUsed() throws {
        let folder = try TestFiles.makeDirectory("session-recheck")
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = SessionTokenTests.Clock()
        let service = try service(folder, clock: clock)
        let sessions = service.services

        // A password changed through the API.
        let beforePassword = try sessions.create("2")
        let bobs = try sessions.create("1")
        #expect(try works(sessions, beforePassword))
        #expect(try works(sessions, bobs))
        var changed = ayse
        changed.passwordHash = "$argon2id$second"
        service.setAccount(id: "2", to: changed)
        #expect(try !works(sessions, beforePassword), "the password changed")
        #expect(try works(sessions, bobs), "another user's token stays")

        // The user removed, then the users reloaded with someone else under the id.
        let beforeRemoval = try sessions.create("2")
        #expect(try works(sessions, beforeRemoval))
        service.setAccount(id: "2", to: nil)
        #expect(try !works(sessions, beforeRemoval), "the user is gone")
        service.usersChanged([changed, bob])
        let beforeReload = try sessions.create("2")
        #expect(try works(sessions, beforeReload))
        service.usersChanged([User(id: "2", username: "Zeynep", passwordHash: "$argon2id$second", rooms: []), bob])
        #expect(try !works(sessions, beforeReload), "id 2 is someone else now")
        service.usersChanged([changed, bob])

        // Log out everywhere, a logout here, and one made on another instance.
        let beforeAll = try sessions.create("2")
        #expect(try works(sessions, beforeAll))
        try sessions.revokeAll("2")
        #expect(try !works(sessions, beforeAll))
        let beforeLogout = try sessions.create("2")
        let kept = try sessions.create("2")
        #expect(try works(sessions, beforeLogout))
        #expect(try works(sessions, kept))
        try sessions.revoke(beforeLogout)
        #expect(try !works(sessions, beforeLogout))
        #expect(try works(sessions, kept), "only that session ends")
        let claims = try #require(service.claims(of: kept))
        #expect(try service.revokeRemote(id: claims.idText, expiresAt: claims.expiresAt))
        #expect(try !works(sessions, kept), "a logout from another instance")

        // Expiry, with nothing else changing.
        let expiring = try sessions.create("1")
        #expect(try works(sessions, expiring))
        clock.advance(61)
        #expect(try !works(sessions, expiring), "expired")
        #expect(try !works(sessions, bobs), "expired")
    }
}
