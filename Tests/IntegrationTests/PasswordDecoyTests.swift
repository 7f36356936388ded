import BridgeCrypto
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The other half of the decoy (README, Security model): with no user, `PasswordHasher.verify`
/// checks the password against a real argon2id hash made at the same cost as users' hashes, so
/// libsodium does the same work; LoginGateTests checks that the gate always asks.
@Suite struct PasswordDecoyTests {
    /// `$argon2id$v=19$m=65536,t=2,p=1`: the algorithm, version and cost of a hash string.
    static func parameters(_ hash: String) -> String {
        hash.split(separator: "$", omittingEmptySubsequences: true).prefix(3).joined(separator: "$")
    }

    @Test func theDecoyIsARealHashAtTheUsersCost() throws {
        let decoy = PasswordHasher.decoyHash
        let real = try PasswordHasher.hash(password: "12345")
        #expect(decoy.hasPrefix("$argon2id$"), "\(decoy.prefix(30))")
        #expect(Self.parameters(decoy) == Self.parameters(real), "decoy \(Self.parameters(decoy)), users \(Self.parameters(real))")
        #expect(decoy.count == real.count, "a full hash: salt and digest of the same length")
        #expect(!PasswordHasher.verify(password: "12345", hash: decoy))
    }

    @Test func noUserNeverMatchesAndAUsersHashDoes() throws {
        let real = try PasswordHasher.hash(password: "12345")
        #expect(PasswordHasher.verify(password: "12345", userHash: real))
        #expect(!PasswordHasher.verify(password: "wrong", userHash: real))
        #expect(!PasswordHasher.verify(password: "12345", userHash: nil))
        #expect(!PasswordHasher.verify(password: "", userHash: nil))
    }

    /// Minor page faults of this thread while `work` runs: argon2id at 64 MiB touches every page
    /// of its fresh buffer, so a real verification shows as about 16,000 faults (work done, not time).
    static func pageFaults(_ work: () -> Void) -> Int {
        let thisThread: Int32 = 1  // RUSAGE_THREAD, which Glibc's Swift module leaves out
        var before = rusage()
        var after = rusage()
        getrusage(thisThread, &before)
        work()
        getrusage(thisThread, &after)
        return after.ru_minflt - before.ru_minflt
    }

    @Test func anUnknownUserCostsTheSameArgon2WorkAsAKnownOne() throws {
        let real = try PasswordHasher.hash(password: "12345")
        _ = PasswordHasher.decoyHash  // made once, before measuring
        let known = Self.pageFaults { _ = PasswordHasher.verify(password: "wrong", userHash: real) }
        let unknown = Self.pageFaults { _ = PasswordHasher.verify(password: "wrong", userHash: nil) }
        #expect(known > 10_000, "a verification touched \(known) pages")
        #expect(unknown * 2 > known, "unknown user: \(unknown) page faults, known user: \(known)")
    }
}
