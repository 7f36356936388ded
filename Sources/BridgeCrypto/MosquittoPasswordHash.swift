import COpenSSL
import Foundation

/// Password hashes in mosquitto 2.0's own `password_file` format, PBKDF2-HMAC-SHA512 through
/// OpenSSL's libcrypto (as mosquitto and `mosquitto_passwd` compute it):
///
///     $7$<iterations>$<base64 salt>$<base64 hash>
///
/// with a 12-byte random salt, a 64-byte derived key and standard base64 with padding. Only the
/// iteration count differs from what `mosquitto_passwd` writes (its default, 101, is far too low),
/// and the count travels in each hash, so mosquitto verifies it and `mosquitto_passwd` keeps
/// editing the file.
public enum MosquittoPasswordHash {
    /// A failure inside libcrypto, or a bad argument.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The parts of a `$7$` hash.
    public struct Parsed: Sendable, Equatable {
        public var iterations: Int
        public var salt: [UInt8]
        public var key: [UInt8]
    }

    /// OWASP's 2023 minimum for PBKDF2-HMAC-SHA512.
    public static let defaultIterations = 210_000
    /// mosquitto's salt length; it refuses hashes with any other.
    public static let saltLength = 12
    /// SHA-512's output length, the derived key length mosquitto uses.
    public static let keyLength = 64

    /// Hashes `password` with a fresh random salt.
    public static func hash(password: String, iterations: Int = defaultIterations) throws(Failure) -> String {
        var salt = [UInt8](repeating: 0, count: saltLength)
        guard RAND_bytes(&salt, Int32(saltLength)) == 1 else {
            throw Failure(description: "libcrypto could not produce random bytes for the salt")
        }
        return try hash(password: password, salt: salt, iterations: iterations)
    }

    /// Hashes `password` with a given salt: for tests, and for checking a stored hash.
    public static func hash(password: String, salt: [UInt8], iterations: Int) throws(Failure) -> String {
        let key = try derive(password: password, salt: salt, iterations: iterations, length: keyLength)
        return "$7$\(iterations)$\(Data(salt).base64EncodedString())$\(Data(key).base64EncodedString())"
    }

    /// Splits a `$7$` hash into its parts; `nil` when it is not one.
    public static func parse(_ hash: String) -> Parsed? {
        let parts = hash.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "7",
              let iterations = Int(parts[2]), (1...Int(Int32.max)).contains(iterations),
              let salt = Data(base64Encoded: String(parts[3])), !salt.isEmpty,
              let key = Data(base64Encoded: String(parts[4])), !key.isEmpty
        else { return nil }
        return Parsed(iterations: iterations, salt: Array(salt), key: Array(key))
    }

    /// Whether `password` matches a `$7$` hash (compared in constant time). A malformed hash
    /// simply does not match.
    public static func verify(password: String, hash: String) -> Bool {
        guard let parsed = parse(hash),
              let key = try? derive(password: password, salt: parsed.salt, iterations: parsed.iterations,
                                    length: parsed.key.count)
        else { return false }
        return CRYPTO_memcmp(key, parsed.key, key.count) == 0
    }

    /// PBKDF2-HMAC-SHA512 of the password's UTF-8 bytes.
    private static func derive(password: String, salt: [UInt8], iterations: Int, length: Int) throws(Failure)
        -> [UInt8]
    {
        guard (1...Int(Int32.max)).contains(iterations) else {
            throw Failure(description: "the iteration count must be from 1 to \(Int32.max), got \(iterations)")
        }
        var key = [UInt8](repeating: 0, count: length)
        let byteCount = Int32(password.utf8.count)
        let rc = password.withCString { text in
            PKCS5_PBKDF2_HMAC(text, byteCount, salt, Int32(salt.count), Int32(iterations), EVP_sha512(),
                              Int32(length), &key)
        }
        guard rc == 1 else { throw Failure(description: "PBKDF2-HMAC-SHA512 failed in libcrypto") }
        return key
    }
}
