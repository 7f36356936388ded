import BridgeCrypto
import BridgeRuntime
import Foundation
import Testing

/// mosquitto's `$7$` PBKDF2-SHA512 password hashes, checked against known answers and against
/// Debian's own `mosquitto_passwd`.
@Suite(.timeLimit(.minutes(1)))
struct MosquittoPasswordHashTests {
    /// A line `mosquitto_passwd -b pw alice secret` (mosquitto 2.0.11) wrote: its default 101 iterations.
    static let mosquittoPasswdLine =
        "alice:$7$101$oeBey22t0EtbMG9T$WTkQrdWzDUiN+tzerJoAjvWFAFFQ/Z9w+fIkqo63zlbMLwfyu/f3eFNg3mjsP5w1IDMVo2Hz8dn9WtJtPocaWA=="

    @Test func hashesHaveMosquittosFormatWith210000Iterations() throws {
        let hash = try MosquittoPasswordHash.hash(password: "12345")
        // 12 salt bytes: 16 base64 characters; 64 key bytes: 86 characters and "==" padding.
        #expect(hash.wholeMatch(of: /\$7\$210000\$[A-Za-z0-9+\/]{16}\$[A-Za-z0-9+\/]{86}==/) != nil, "\(hash)")
        let parsed = try #require(MosquittoPasswordHash.parse(hash))
        #expect(parsed.iterations == 210_000)
        #expect(parsed.salt.count == 12)
        #expect(parsed.key.count == 64)
        #expect(MosquittoPasswordHash.verify(password: "12345", hash: hash))
        #expect(!MosquittoPasswordHash.verify(password: "123456", hash: hash))
        #expect(!MosquittoPasswordHash.verify(password: "", hash: hash))
    }

    @Test func theIterationCountIsTheCallersAndTravelsInTheHash() throws {
        let hash = try MosquittoPasswordHash.hash(password: "pw", iterations: 1000)
        #expect(hash.hasPrefix("$7$1000$"))
        #expect(MosquittoPasswordHash.verify(password: "pw", hash: hash))
        #expect(throws: MosquittoPasswordHash.Failure.self) {
            try MosquittoPasswordHash.hash(password: "pw", iterations: 0)
        }
    }

    @Test func everyHashGetsAFreshSalt() throws {
        let hashes = try (0..<4).map { _ in try MosquittoPasswordHash.hash(password: "same", iterations: 1000) }
        let salts = hashes.compactMap { MosquittoPasswordHash.parse($0)?.salt }
        #expect(Set(hashes).count == 4)
        #expect(Set(salts).count == 4)
        #expect(salts.allSatisfy { $0 != [UInt8](repeating: 0, count: 12) })
        #expect(hashes.allSatisfy { MosquittoPasswordHash.verify(password: "same", hash: $0) })
    }

    @Test func matchesAPublishedPBKDF2SHA512TestVector() throws {
        // PBKDF2-HMAC-SHA512, P = "password", S = "salt", c = 1, dkLen = 64 (the RFC 6070 inputs).
        let expected = "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252"
            + "c02d470a285a0501bad999bfe943c08f050235d7d68b1da55e63f73b60a57fce"
        let hash = try MosquittoPasswordHash.hash(password: "password", salt: Array("salt".utf8), iterations: 1)
        let key = try #require(MosquittoPasswordHash.parse(hash)).key
        #expect(key.map { String(format: "%02x", $0) }.joined() == expected)
    }

    @Test func recomputesWhatMosquittoPasswdWroteFromItsSalt() throws {
        let stored = String(Self.mosquittoPasswdLine.dropFirst("alice:".count))
        let parsed = try #require(MosquittoPasswordHash.parse(stored))
        #expect(parsed.iterations == 101)
        #expect(try MosquittoPasswordHash.hash(password: "secret", salt: parsed.salt, iterations: 101) == stored)
        #expect(MosquittoPasswordHash.verify(password: "secret", hash: stored))
        #expect(!MosquittoPasswordHash.verify(password: "Secret", hash: stored))
    }

    @Test func malformedHashesNeverMatch() {
        for hash in ["", "secret", "$6$c2FsdA==$aGFzaA==", "$7$0$c2FsdA==$aGFzaA==", "$7$x$c2FsdA==$aGFzaA==",
                     "$7$10$!!$aGFzaA==", "$7$10$c2FsdA==", "$7$10$c2FsdA==$$"] {
            #expect(MosquittoPasswordHash.parse(hash) == nil, "\(hash)")
            #expect(!MosquittoPasswordHash.verify(password: "", hash: hash), "\(hash)")
        }
    }

    @Test func mosquittoPasswdKeepsEditingOurFile() throws {
        let directory = try TestFiles.makeDirectory("passwd")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("passwd").path
        let ours = "Cemalettin:" + (try MosquittoPasswordHash.hash(password: "12345"))
        try (ours + "\n").write(toFile: file, atomically: true, encoding: .utf8)

        // mosquitto_passwd parses every line to update one: ours must survive it unchanged.
        let tool = try ChildProcess.spawn("/usr/bin/mosquitto_passwd", ["-b", file, "Mehmet", "123456"])
        #expect(tool.waitForExit(timeout: 20) == 0)
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines.first == ours)
        let theirs = try #require(lines.last { $0.hasPrefix("Mehmet:") })
        #expect(MosquittoPasswordHash.verify(password: "123456", hash: String(theirs.dropFirst("Mehmet:".count))))
    }
}
