import Synchronization
import Testing
@testable import BridgeCore

/// The password check every login goes through (README, Security model: "an unknown username is
/// checked against a decoy hash, so it takes as long as a wrong password").
@Suite struct LoginGateTests {
    /// Records every hash the gate asked to verify (nil: no user, the decoy's turn).
    final class Verifications: Sendable {
        private let hashes = Mutex<[String?]>([])

        var all: [String?] { hashes.withLock { $0 } }

        func check(_ password: String, _ hash: String?) -> Bool {
            hashes.withLock { $0.append(hash) }
            return hash == "$argon2id$hash-1" && password == "12345"
        }
    }

    @Test func anUnknownUsernameCostsAVerificationAsAWrongPasswordDoes() {
        let verifications = Verifications()
        let gate = LoginGate(verifyPassword: { verifications.check($0, $1) }, now: { 0 })
        let home = Fixtures.home()

        #expect(gate.attempt(username: "Nobody", password: "12345", address: "a", in: home) == .denied)
        #expect(verifications.all == [nil], "an unknown user is verified too, against no user's hash")
        #expect(gate.attempt(username: "Cemalettin", password: "wrong", address: "b", in: home) == .denied)
        #expect(verifications.all == [nil, "$argon2id$hash-1"])
        guard case .granted(let user) = gate.attempt(username: "Cemalettin", password: "12345", address: "c", in: home)
        else {
            Issue.record("the right password was refused")
            return
        }
        #expect(user.id == "1")
        #expect(verifications.all.count == 3, "one verification per attempt, whoever asks")
    }

    @Test func aThrottledAttemptIsNotVerifiedAtAll() {
        let verifications = Verifications()
        let gate = LoginGate(verifyPassword: { verifications.check($0, $1) }, now: { 0 })
        let home = Fixtures.home()
        for _ in 0..<4 { _ = gate.attempt(username: "Nobody", password: "x", address: "a", in: home) }
        #expect(verifications.all.count == 4)
        #expect(gate.attempt(username: "Nobody", password: "x", address: "a", in: home) == .throttled(retryAfter: 1))
        #expect(verifications.all.count == 4)
    }
}
