/// What an API token says about its session, before the MAC that makes it trustworthy. The bytes
/// are: format version (1 byte), session id (16 bytes), expiry in Unix seconds (8 bytes, big
/// endian), then the user id in UTF-8. Binary rather than JSON so that tokens stay short.
public struct SessionClaims: Sendable, Equatable {
    public static let version: UInt8 = 1
    public static let idBytes = 16
    private static let headerBytes = 1 + idBytes + 8

    /// Random, unique per login: what a revocation names.
    public var id: [UInt8]
    public var userID: String
    /// Unix seconds; the token is dead from this second on.
    public var expiresAt: Int64

    public init(id: [UInt8], userID: String, expiresAt: Int64) {
        precondition(id.count == Self.idBytes, "a session id is \(Self.idBytes) bytes")
        self.id = id
        self.userID = userID
        self.expiresAt = expiresAt
    }

    /// Parses a payload; `nil` for another version, a wrong length or an empty or non-UTF-8 user.
    public init?(payload: [UInt8]) {
        guard payload.count > Self.headerBytes, payload[0] == Self.version else { return nil }
        let expiry = payload[(1 + Self.idBytes)..<Self.headerBytes].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard let user = String(validating: Array(payload[Self.headerBytes...]), as: UTF8.self),
              expiry <= UInt64(Int64.max) else { return nil }
        self.init(id: Array(payload[1...Self.idBytes]), userID: user, expiresAt: Int64(expiry))
    }

    public var payload: [UInt8] {
        let expiry = UInt64(max(0, expiresAt))
        let expiryBytes = (0..<8).reversed().map { UInt8(truncatingIfNeeded: expiry >> (8 * $0)) }
        return [Self.version] + id + expiryBytes + Array(userID.utf8)
    }

    /// The id as 32 lowercase hex digits: how revocations are stored and sent between instances.
    public var idText: String { SessionClaims.hex(id) }

    public func isExpired(atUnixSeconds now: Double) -> Bool {
        now >= Double(expiresAt)
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
