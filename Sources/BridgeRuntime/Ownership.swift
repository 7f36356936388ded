import BridgeCore
import BridgeStorage
import Foundation
import Synchronization

/// Which users this instance acts for (docs/scaling.md, "Leases"): simulates or polls, reads
/// devices for, applies commands of, publishes and announces. On a cluster on SQLite (or a single
/// bridge) that is the hash owner from the config (`ClusterMembership`) and never changes; on a
/// cluster on PostgreSQL it is the set of users whose lease `LeaseKeeper` holds, and it changes
/// when leases are taken or handed back. Everything that asks "do I own this user?" asks here.
final class Ownership: Sendable {
    /// Users taken and handed back in one lease round.
    struct Change: Sendable {
        var taken: Set<String>
        var released: Set<String>
    }

    let membership: ClusterMembership
    /// By lease: the user → instance holding its lease now, as last read; nil when by hash.
    private let holders: Mutex<[String: Int]?>
    private let listeners = Mutex<[@Sendable (Change) -> Void]>([])

    /// By lease: where the current holder is read when it must be exact (a relayed command).
    private let leases: LeaseStore?

    /// - Parameter leases: the cluster's leases on PostgreSQL; nil for ownership by hash.
    init(membership: ClusterMembership, leases: LeaseStore?) {
        self.membership = membership
        self.leases = leases
        holders = Mutex(leases == nil ? nil : [:])
    }

    /// By lease, only while this instance holds the user's lease (nobody acts for a user whose
    /// lease nobody holds, so two instances never act at once).
    func owns(_ user: String) -> Bool {
        holders.withLock { $0.map { $0[user] == membership.index } } ?? membership.owns(user)
    }

    /// The instance acting for `user`: its lease holder, or its hash owner when nobody holds the
    /// lease (or ownership is by hash).
    func owner(of user: String) -> Int {
        holders.withLock { $0?[user] } ?? membership.owner(of: user)
    }

    /// The instance acting for `user` as the database says now (another instance may have taken
    /// it since this one's last round); the last known owner when the database cannot tell.
    func currentOwner(of user: String) -> Int {
        guard let leases, let holder = try? leases.holder(of: user, now: Date()) else { return owner(of: user) }
        return holder
    }

    /// Who acts for each user as the database says now, for announcing a dead instance's rooms
    /// `offline` (docs/scaling.md, "Availability"): by lease, the instance named on the user's lease
    /// unless it handed the lease back (expired or not: a killed instance's leases run out but name
    /// it until another instance takes them); by hash, or when the database cannot tell, `owner(of:)`.
    func currentOwners() -> @Sendable (_ user: String) -> Int {
        guard let leases, let rows = try? leases.leases() else { return { self.owner(of: $0) } }
        let named = rows.filter { !$0.value.isReleased }.mapValues(\.instance)
        return { named[$0] ?? self.owner(of: $0) }
    }

    /// Called with every change of the users this instance owns (by lease only).
    func onChange(_ listener: @escaping @Sendable (Change) -> Void) {
        listeners.withLock { $0.append(listener) }
    }

    /// The lease holders as `LeaseKeeper` now knows them; tells the listeners what this instance
    /// took and handed back.
    func update(holders next: [String: Int]) {
        let me = membership.index
        let change = holders.withLock { current -> Change in
            let before = Set((current ?? [:]).filter { $0.value == me }.keys)
            let after = Set(next.filter { $0.value == me }.keys)
            current = next
            return Change(taken: after.subtracting(before), released: before.subtracting(after))
        }
        guard !change.taken.isEmpty || !change.released.isEmpty else { return }
        for listener in listeners.withLock({ $0 }) { listener(change) }
    }
}
