import BridgeCore
import Testing

/// The token payload's byte format and the in-memory revocation list.
@Suite struct SessionClaimsTests {
    let id: [UInt8] = Array(0..<16)

    @Test func aPayloadReadsBackAsItWasWritten() throws {
        let claims = SessionClaims(id: id, userID: "user_7-b", expiresAt: 1_900_000_000, binding: [9, 8, 7, 6, 5, 4, 3, 2])
        let payload = claims.payload
        #expect(payload.count == 1 + 16 + 8 + 8 + 8)
        #expect(payload.first == SessionClaims.version)
        #expect(SessionClaims(payload: payload) == claims)
        #expect(claims.idText == "000102030405060708090a0b0c0d0e0f")
    }

    @Test func malformedPayloadsAreRejected() {
        let payload = SessionClaims(id: id, userID: "1", expiresAt: 1_900_000_000).payload
        var otherVersion = payload
        otherVersion[0] = 1  // before tokens were bound to the account
        #expect(SessionClaims(payload: otherVersion) == nil)
        #expect(SessionClaims(payload: Array(payload.dropLast())) == nil, "no user")
        #expect(SessionClaims(payload: []) == nil)
        #expect(SessionClaims(payload: Array(payload.dropLast()) + [0xff]) == nil, "user not UTF-8")
        var huge = payload
        huge[17] = 0xff  // the expiry's top byte: beyond Int64
        #expect(SessionClaims(payload: huge) == nil)
    }

    @Test func expiryIsTheFirstDeadSecond() {
        let claims = SessionClaims(id: id, userID: "1", expiresAt: 100)
        #expect(!claims.isExpired(atUnixSeconds: 99.999))
        #expect(claims.isExpired(atUnixSeconds: 100))
    }

    @Test func revocationsAreKeptUntilTheirTokenWouldExpire() {
        var list = RevokedSessions()
        let entry = SessionRevocation(id: String(repeating: "a", count: 32), expiresAt: 200)
        #expect(entry.hasValidID)
        let first = list.insert(entry, now: 100)
        let repeated = list.insert(entry, now: 100)
        #expect(first)
        #expect(!repeated, "a repeat is no news")
        #expect(list.contains(id: entry.id))
        list.prune(now: 199)
        #expect(list.contains(id: entry.id))
        list.prune(now: 200)
        #expect(!list.contains(id: entry.id))
        #expect(!SessionRevocation(id: "ABC", expiresAt: 1).hasValidID)
        #expect(!SessionRevocation(id: String(repeating: "G", count: 32), expiresAt: 1).hasValidID)
    }

    @Test func manyRevocationsPruneTheExpiredAsTheyGrow() {
        var list = RevokedSessions()
        for number in 0..<5000 {
            let hex = String(number, radix: 16)
            let id = String(repeating: "0", count: 32 - hex.count) + hex
            // Half of them already expired at the time of the later inserts.
            list.insert(SessionRevocation(id: id, expiresAt: number.isMultiple(of: 2) ? 50 : 500), now: 100)
        }
        #expect(list.count < 5000, "expired entries were never dropped")
        #expect(list.count >= 2500, "live entries were dropped")
    }
}
