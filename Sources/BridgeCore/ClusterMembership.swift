/// Which users one bridge instance owns when `cluster.instances` > 1 (docs/scaling.md): instance `index`
/// alone simulates or polls their rooms, applies their commands, announces them to Home Assistant
/// and runs the alarms stored for them. Every instance computes the same answer from the config
/// alone, so no coordination is needed.
public struct ClusterMembership: Sendable, Equatable {
    public let instances: Int
    public let index: Int

    public init(instances: Int, index: Int) {
        precondition(instances >= 1 && (0..<instances).contains(index), "index must be in 0..<instances")
        self.instances = instances
        self.index = index
    }

    /// A single bridge: owns everyone.
    public static let single = ClusterMembership(instances: 1, index: 0)

    public var isClustered: Bool { instances > 1 }

    /// The instance that owns a user.
    public func owner(of userID: String) -> Int {
        instances == 1 ? 0 : Int(Self.stableHash(userID) % UInt64(instances))
    }

    public func owns(_ userID: String) -> Bool {
        owner(of: userID) == index
    }

    /// 64-bit FNV-1a over the UTF-8 bytes. Swift's `Hasher` is seeded per process, so it would
    /// give every instance (and every restart) a different owner; this is the same everywhere.
    public static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}
