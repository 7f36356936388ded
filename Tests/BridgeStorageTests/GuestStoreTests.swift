import BridgeCore
import BridgeStorage
import Foundation
import Testing

/// Guests in a real SQLite file and a real PostgreSQL database: kept with their owner, read back
/// whole, gone once expired.
@Suite struct GuestStoreTests {
    @Test(arguments: Engine.allCases) func guestsReadBackWholeAndOnlyTheirOwnerDeletesThem(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let store = GuestStore(database: try test.open())
        let kitchen = Guest(id: String(repeating: "a", count: 32), userID: "1", rooms: ["kitchen", "garden"],
                            access: .control, expiresAt: 200)
        let old = Guest(id: String(repeating: "b", count: 32), userID: "1", rooms: ["garden"], access: .read,
                        expiresAt: 100)
        try store.add(kitchen, createdAt: 10)
        try store.add(old, createdAt: 20)
        #expect(try store.live(now: 50) == [kitchen, old])
        #expect(try store.live(now: 100) == [kitchen], "expired at its second")

        // Another database handle on the same database: what a restart sees.
        let reopened = GuestStore(database: try test.open())
        #expect(try reopened.purgeExpired(now: 100) == 1)
        #expect(try !reopened.delete(id: kitchen.id, userID: "2"), "another user's guest")
        #expect(try reopened.live(now: 0) == [kitchen])
        #expect(try reopened.delete(id: kitchen.id, userID: "1"))
        #expect(try reopened.live(now: 0).isEmpty)
    }
}

/// Users made through the API, on both engines: read back oldest first, changed and removed by id,
/// a username taken twice refused.
@Suite struct UserStoreTests {
    @Test(arguments: Engine.allCases) func apiUsersReadBackChangeAndGo(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let store = UserStore(database: try test.open())
        var ada = User(id: "u000000000001", username: "ada", passwordHash: "$argon2id$one", rooms: [])
        let bob = User(id: "u000000000002", username: "bob", passwordHash: "$argon2id$two", rooms: [], isAdmin: true)
        try store.add(ada, createdAt: 10)
        try store.add(bob, createdAt: 20)
        #expect(throws: StorageError.self) {
            try store.add(User(id: "u000000000003", username: "ada", passwordHash: "$argon2id$x", rooms: []), createdAt: 30)
        }
        ada.passwordHash = "$argon2id$changed"
        ada.isAdmin = true
        #expect(try store.update(ada))
        let reopened = UserStore(database: try test.open())
        #expect(try reopened.all() == [ada, bob])
        #expect(try reopened.delete(id: bob.id))
        #expect(try !reopened.delete(id: bob.id), "gone already")
        #expect(try reopened.all() == [ada])
    }
}
