import BridgeCore
import BridgeStorage
import Foundation
import Testing

/// Guests in a real SQLite file: kept with their owner, read back whole, gone once expired.
@Suite struct GuestStoreTests {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("guests-\(UUID().uuidString)")

    @Test func guestsReadBackWholeAndOnlyTheirOwnerDeletesThem() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("bridge.sqlite").path
        let store = GuestStore(database: try Database(path: path))
        let kitchen = Guest(id: String(repeating: "a", count: 32), userID: "1", rooms: ["kitchen", "garden"],
                            access: .control, expiresAt: 200)
        let old = Guest(id: String(repeating: "b", count: 32), userID: "1", rooms: ["garden"], access: .read,
                        expiresAt: 100)
        try store.add(kitchen, createdAt: 10)
        try store.add(old, createdAt: 20)
        #expect(try store.live(now: 50) == [kitchen, old])
        #expect(try store.live(now: 100) == [kitchen], "expired at its second")

        // Another database handle on the same file: what a restart sees.
        let reopened = GuestStore(database: try Database(path: path))
        #expect(try reopened.purgeExpired(now: 100) == 1)
        #expect(try !reopened.delete(id: kitchen.id, userID: "2"), "another user's guest")
        #expect(try reopened.live(now: 0) == [kitchen])
        #expect(try reopened.delete(id: kitchen.id, userID: "1"))
        #expect(try reopened.live(now: 0).isEmpty)
    }
}
