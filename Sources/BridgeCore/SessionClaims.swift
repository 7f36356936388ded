/// What an API token says about its session, before the MAC that makes it trustworthy. The bytes
/// are: format version (1 byte), session id (16 bytes), expiry in Unix seconds (8 bytes, big
/// endian), the account binding (8 bytes), then the user id in UTF-8. Binary rather than JSON so
/// that tokens stay short.
///
/// The binding ties the token to the account as it was at login (README "Sessions"): a digest of the
/// user's id, username and password hash and of the user's logout-everywhere count. A password
/// change, a user id given to someone else, or "log out everywhere" changes it, and the token dies.
public struct SessionClaims: Sendable, Equatable {
    /// 2 since tokens carry the binding; version 1 tokens are refused (their users log in again).
    public static let version: UInt8 = 2
    /// A guest's token (README, "Guests"): the same layout, but good only while the guest it names
    /// (by its id) exists, and only for what the guest may see and do.
    public static let guestVersion: UInt8 = 3
    public static let idBytes = 16
    public static let bindingBytes = 8
    private static let headerBytes = 1 + idBytes + 8 + bindingBytes

    /// Random, unique per login: what a revocation names.
    public var id: [UInt8] { didSet { idText = SessionClaims.hex(id) } }
    /// The id as 32 lowercase hex digits: how revocations are stored and sent between instances. Kept
    /// rather than formatted when asked: every authenticated request asks for it more than once.
    public private(set) var idText: String
    public var userID: String
    /// Unix seconds; the token is dead from this second on.
    public var expiresAt: Int64
    /// `bindingBytes` bytes naming the account as it was at login.
    public var binding: [UInt8]
    /// Whether this is a guest's token rather than the user's own.
    public var isGuest: Bool

    public init(id: [UInt8], userID: String, expiresAt: Int64,
                binding: [UInt8] = [UInt8](repeating: 0, count: SessionClaims.bindingBytes), isGuest: Bool = false) {
        precondition(id.count == Self.idBytes, "a session id is \(Self.idBytes) bytes")
        precondition(binding.count == Self.bindingBytes, "a binding is \(Self.bindingBytes) bytes")
        self.id = id
        self.idText = SessionClaims.hex(id)
        self.userID = userID
        self.expiresAt = expiresAt
        self.binding = binding
        self.isGuest = isGuest
    }

    /// Parses a payload; `nil` for another version, a wrong length or an empty or non-UTF-8 user.
    public init?(payload: [UInt8]) {
        guard payload.count > Self.headerBytes, payload[0] == Self.version || payload[0] == Self.guestVersion
        else { return nil }
        let expiryEnd = 1 + Self.idBytes + 8
        let expiry = payload[(1 + Self.idBytes)..<expiryEnd].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard let user = String(validating: Array(payload[Self.headerBytes...]), as: UTF8.self),
              expiry <= UInt64(Int64.max) else { return nil }
        self.init(id: Array(payload[1...Self.idBytes]), userID: user, expiresAt: Int64(expiry),
                  binding: Array(payload[expiryEnd..<Self.headerBytes]), isGuest: payload[0] == Self.guestVersion)
    }

    public var payload: [UInt8] {
        let expiry = UInt64(max(0, expiresAt))
        let expiryBytes = (0..<8).reversed().map { UInt8(truncatingIfNeeded: expiry >> (8 * $0)) }
        return [isGuest ? Self.guestVersion : Self.version] + id + expiryBytes + binding + Array(userID.utf8)
    }

    public func isExpired(atUnixSeconds now: Double) -> Bool {
        now >= Double(expiresAt)
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { text in
            for (index, byte) in bytes.enumerated() {
                text[2 * index] = hexDigit(byte >> 4)
                text[2 * index + 1] = hexDigit(byte & 0x0f)
            }
            return bytes.count * 2
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
