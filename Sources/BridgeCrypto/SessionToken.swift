import CSodium

/// Signs and checks API tokens: `base64url(payload).base64url(MAC)`, the MAC being libsodium's
/// `crypto_auth` (HMAC-SHA-512-256) over the payload bytes. Any instance holding the same key can
/// check a token, so no instance needs to have seen it issued. What the payload means is the
/// caller's business (`SessionClaims` in BridgeCore).
public struct SessionSigner: Sendable {
    public static let keyBytes = Int(crypto_auth_KEYBYTES)
    private static let macBytes = Int(crypto_auth_BYTES)
    /// Tells keys derived from `cluster.secret` apart from any other use of the same secret.
    private static let derivationContext = Array("smarthome-bridge session key v1".utf8)

    private let key: [UInt8]

    /// - Parameter key: exactly `keyBytes` bytes, e.g. from `randomKey()`.
    public init?(key: [UInt8]) {
        guard key.count == Self.keyBytes else { return nil }
        _ = PasswordHasher.isReady
        self.key = key
    }

    /// A key derived from a shared secret (BLAKE2b keyed with a fixed context): the same secret
    /// gives the same key on every instance. The secret must itself be long and random; this is
    /// not a password hash.
    public init(secret: String) {
        _ = PasswordHasher.isReady
        var derived = [UInt8](repeating: 0, count: Self.keyBytes)
        let input = Array(secret.utf8)
        crypto_generichash(&derived, derived.count, input, UInt64(input.count),
                           Self.derivationContext, Self.derivationContext.count)
        key = derived
    }

    public static func randomKey() -> [UInt8] {
        SessionToken.randomBytes(keyBytes)
    }

    /// A short digest of `bytes` keyed with this signer's key (BLAKE2b): the same on every instance
    /// with the same key, and meaningless without it.
    public func digest(_ bytes: [UInt8], count: Int) -> [UInt8] {
        // BLAKE2b gives at least 16 bytes (crypto_generichash_BYTES_MIN); shorter digests are its prefix.
        var output = [UInt8](repeating: 0, count: max(16, count))
        crypto_generichash(&output, output.count, bytes, UInt64(bytes.count), key, key.count)
        return Array(output.prefix(count))
    }

    /// The token for `payload`.
    public func sign(_ payload: [UInt8]) -> String {
        var mac = [UInt8](repeating: 0, count: Self.macBytes)
        crypto_auth(&mac, payload, UInt64(payload.count), key)
        return Base64URL.encode(payload) + "." + Base64URL.encode(mac)
    }

    /// The payload of a token whose MAC is right for this key, `nil` for anything else. The MAC
    /// comparison is libsodium's, in constant time.
    public func verify(_ token: String) -> [UInt8]? {
        // Split on the byte: String's Character-wise split showed in every API request's profile.
        let bytes = Array(token.utf8)
        guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")), !bytes[(dot + 1)...].contains(UInt8(ascii: ".")),
              let payload = Base64URL.decode(bytes[..<dot]), let mac = Base64URL.decode(bytes[(dot + 1)...]),
              mac.count == Self.macBytes else { return nil }
        return crypto_auth_verify(mac, payload, UInt64(payload.count), key) == 0 ? payload : nil
    }
}

/// Random material from libsodium.
public enum SessionToken {
    /// Random bytes from libsodium, as URL-safe base64 (for generated passwords and secrets).
    public static func randomText(bytes count: Int) -> String {
        Base64URL.encode(randomBytes(count))
    }

    /// `count` random bytes from libsodium (session ids).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        _ = PasswordHasher.isReady
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, bytes.count)
        return bytes
    }
}

/// URL-safe base64 without padding, libsodium's, which rejects any character outside the alphabet.
enum Base64URL {
    private static let variant = Int32(sodium_base64_VARIANT_URLSAFE_NO_PADDING)

    static func encode(_ bytes: [UInt8]) -> String {
        var length = sodium_base64_encoded_len(bytes.count, variant)
        var output = [CChar](repeating: 0, count: length)
        sodium_bin2base64(&output, length, bytes, bytes.count, variant)
        length = output.firstIndex(of: 0) ?? output.count
        return String(decoding: output[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The bytes of `text`, `nil` unless every character is in the alphabet (libsodium fails
    /// when given no end pointer and something else follows) and the length is possible.
    static func decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        let input = Array(text)
        guard !input.isEmpty else { return nil }
        var output = [UInt8](repeating: 0, count: input.count * 3 / 4 + 1)
        var written = 0
        let status = input.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                sodium_base642bin(&output, output.count, chars.baseAddress, chars.count, nil, &written, nil, variant)
            }
        }
        return status == 0 ? Array(output[..<written]) : nil
    }
}
