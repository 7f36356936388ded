/// Who owns a user when instances share a PostgreSQL database (docs/scaling.md, "Leases"): a pure
/// decision from the leases and the live instances as the database holds them, so every instance
/// reaches the same answer and the tests can check it without a database.
///
/// The owner of a user is its hash owner (`ClusterMembership`) while that instance is live;
/// otherwise the live instance that ranks highest for the user (rendezvous hashing), so a dead
/// instance's users spread over the others and come back to it when it returns. An instance acts
/// for a user only while it holds the user's lease: it takes a lease only when the lease is free
/// or expired, and hands one back (releases it) when the preferred owner is live again, so two
/// instances never hold one user at once. Every take raises the lease's epoch, which fences the
/// previous holder's writes.
public enum LeaseOwnership {
    /// One user's lease as stored.
    public struct Lease: Sendable, Equatable {
        public var user: String
        public var instance: Int
        public var epoch: Int64
        /// Unix seconds; a released lease has 0.
        public var expiresAt: Double

        public init(user: String, instance: Int, epoch: Int64, expiresAt: Double) {
            self.user = user
            self.instance = instance
            self.epoch = epoch
            self.expiresAt = expiresAt
        }

        public func isHeld(at now: Double) -> Bool { expiresAt > now }

        /// Handed back by its holder (not merely run out).
        public var isReleased: Bool { expiresAt == 0 }
    }

    /// What this instance does about one user's lease in this round.
    public enum Step: Sendable, Equatable {
        /// Take the free or expired lease at `epoch` (one above the stored one).
        case acquire(user: String, epoch: Int64)
        /// Extend the lease held at `epoch`.
        case renew(user: String, epoch: Int64)
        /// Give the lease back: the preferred owner is live again.
        case release(user: String, epoch: Int64)
    }

    /// The live instance that should own `user`: its hash owner while live, else the live
    /// instance ranking highest for it; nil when no instance is live.
    public static func preferredOwner(of user: String, instances: Int, live: Set<Int>) -> Int? {
        let owner = ClusterMembership(instances: instances, index: 0).owner(of: user)
        if live.contains(owner) { return owner }
        return live.max { rank(user, $0) < rank(user, $1) || (rank(user, $0) == rank(user, $1) && $0 > $1) }
    }

    private static func rank(_ user: String, _ instance: Int) -> UInt64 {
        ClusterMembership.stableHash("\(user)#\(instance)")
    }

    /// The steps instance `me` takes this round for `users`, from the stored `leases` (by user) and
    /// the instances whose heartbeat is live (`me` counts as live).
    public static func steps(me: Int, instances: Int, live: Set<Int>, users: [String], leases: [String: Lease],
                             now: Double) -> [Step] {
        let live = live.union([me])
        return users.compactMap { user -> Step? in
            let preferred = preferredOwner(of: user, instances: instances, live: live)
            let lease = leases[user]
            if let lease, lease.isHeld(at: now) {
                guard lease.instance == me else { return nil }  // another instance's: never taken early
                return preferred == me ? .renew(user: user, epoch: lease.epoch) : .release(user: user, epoch: lease.epoch)
            }
            guard preferred == me else { return nil }
            return .acquire(user: user, epoch: (lease?.epoch ?? 0) + 1)
        }
    }

    /// The users `me` may act for: those whose lease it holds at `now`.
    public static func owned(by me: Int, leases: [String: Lease], now: Double) -> Set<String> {
        Set(leases.values.filter { $0.instance == me && $0.isHeld(at: now) }.map(\.user))
    }
}
