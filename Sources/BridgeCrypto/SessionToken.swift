import CSodium

/// API session tokens: 256 random bits from libsodium, shown to the client once; the bridge keeps
/// only their BLAKE2b hash.
public enum SessionToken {
    /// A new token: 32 random bytes as URL-safe base64 without padding (43 characters).
    public static func generate() -> String {
        _ = PasswordHasher.isReady
        var bytes = [UInt8](repeating: 0, count: 32)
        randombytes_buf(&bytes, bytes.count)
        return base64URL(bytes)
    }

    /// The stored form of a token: its BLAKE2b-256 hash in hex. Tokens are long and random, so a
    /// fast unsalted hash is enough; what matters is that the database alone yields no token.
    public static func hash(_ token: String) -> String {
        _ = PasswordHasher.isReady
        var digest = [UInt8](repeating: 0, count: 32)
        let input = Array(token.utf8)
        crypto_generichash(&digest, digest.count, input, UInt64(input.count), nil, 0)
        return digest.map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined()
    }

    /// Random bytes from libsodium, as URL-safe base64 (for generated passwords and secrets).
    public static func randomText(bytes count: Int) -> String {
        _ = PasswordHasher.isReady
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, bytes.count)
        return base64URL(bytes)
    }

    private static func base64URL(_ bytes: [UInt8]) -> String {
        var length = sodium_base64_encoded_len(bytes.count, Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING))
        var output = [CChar](repeating: 0, count: length)
        sodium_bin2base64(&output, length, bytes, bytes.count, Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING))
        length = output.firstIndex(of: 0) ?? output.count
        return String(decoding: output[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
