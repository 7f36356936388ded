import CSodium

/// argon2id password hashes through libsodium, in its self-describing string format
/// (`$argon2id$v=19$m=65536,t=2,p=1$...`), so the cost settings travel with each hash.
public enum PasswordHasher {
    /// A failure inside libsodium (out of memory, or the library could not start).
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// libsodium must be initialised once before use; it is safe to call from any thread.
    private static let ready: Bool = sodium_init() >= 0

    /// Whether libsodium started; touching it initialises the library once.
    static var isReady: Bool { ready }

    /// A valid hash of a random password: verifying unknown users against it costs the same time
    /// as verifying a real user, so timing does not tell which usernames exist.
    public static let decoyHash: String = (try? hash(password: "decoy-\(UInt64.random(in: 0...UInt64.max))")) ?? ""

    /// Hashes a password with argon2id at libsodium's interactive cost.
    public static func hash(password: String) throws(Failure) -> String {
        guard ready else { throw Failure(description: "libsodium failed to initialise") }
        var output = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
        let rc = crypto_pwhash_str_alg(
            &output, password, UInt64(password.utf8.count),
            UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE), Int(crypto_pwhash_MEMLIMIT_INTERACTIVE),
            crypto_pwhash_ALG_ARGON2ID13
        )
        guard rc == 0 else { throw Failure(description: "argon2id hashing failed (out of memory?)") }
        return String(decoding: output.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `password` matches `hash`. A malformed hash simply does not match.
    public static func verify(password: String, hash: String) -> Bool {
        guard ready else { return false }
        return crypto_pwhash_str_verify(hash, password, UInt64(password.utf8.count)) == 0
    }

    /// Verifies against the user's hash when there is a user, else against `decoyHash`, so both
    /// paths take the same time.
    public static func verify(password: String, userHash: String?) -> Bool {
        let matches = verify(password: password, hash: userHash ?? decoyHash)
        return userHash != nil && matches
    }
}
