import BridgeCore
import Testing

@Suite struct LeaseOwnershipTests {
    let users = (0..<300).map { "user\($0)" }
    let instances = 3
    let lease = 10.0

    /// Runs one round for every live instance in turn, applying each step as the database would
    /// (a take only of a free or expired lease at the next epoch), and returns the leases after it.
    func round(_ leases: [String: LeaseOwnership.Lease], live: Set<Int>, now: Double) -> [String: LeaseOwnership.Lease] {
        var leases = leases
        for me in live.sorted() {
            for step in LeaseOwnership.steps(me: me, instances: instances, live: live, users: users, leases: leases, now: now) {
                switch step {
                case .acquire(let user, let epoch):
                    let current = leases[user]
                    #expect(current.map { !$0.isHeld(at: now) } ?? true, "\(me) takes \(user) while it is held")
                    #expect(epoch == (current?.epoch ?? 0) + 1)
                    leases[user] = .init(user: user, instance: me, epoch: epoch, expiresAt: now + lease)
                case .renew(let user, let epoch):
                    #expect(leases[user]?.instance == me && leases[user]?.epoch == epoch)
                    leases[user]?.expiresAt = now + lease
                case .release(let user, let epoch):
                    #expect(leases[user]?.instance == me && leases[user]?.epoch == epoch)
                    leases[user]?.expiresAt = 0
                }
            }
        }
        return leases
    }

    /// Nobody holds a user twice: at most one held lease per user, by construction of the map, and
    /// the holders' sets are disjoint.
    func owners(_ leases: [String: LeaseOwnership.Lease], now: Double) -> [Int: Set<String>] {
        Dictionary(uniqueKeysWithValues: (0..<instances).map { ($0, LeaseOwnership.owned(by: $0, leases: leases, now: now)) })
    }

    @Test func withEveryInstanceLiveEachUserGoesToItsHashOwner() {
        let leases = round([:], live: [0, 1, 2], now: 100)
        let membership = (0..<instances).map { ClusterMembership(instances: instances, index: $0) }
        for (instance, owned) in owners(leases, now: 100) {
            #expect(owned == Set(users.filter { membership[instance].owns($0) }))
        }
        // A second round only renews.
        for me in 0..<instances {
            let steps = LeaseOwnership.steps(me: me, instances: instances, live: [0, 1, 2], users: users, leases: leases,
                                             now: 103)
            #expect(steps.allSatisfy { if case .renew = $0 { true } else { false } })
        }
    }

    @Test func aDeadInstancesUsersAreTakenOnlyOnceItsLeasesExpireAndSpreadOverTheOthers() {
        var leases = round([:], live: [0, 1, 2], now: 100)
        let lost = owners(leases, now: 100)[2]!
        // Instance 2 stops; its leases still run until 110: nobody takes them.
        leases = round(leases, live: [0, 1], now: 105)
        #expect(owners(leases, now: 105)[2] == lost)
        leases = round(leases, live: [0, 1], now: 111)
        let after = owners(leases, now: 111)
        #expect(after[2]!.isEmpty)
        #expect(after[0]!.union(after[1]!) == Set(users), "every user has an owner again")
        #expect(!lost.isSubset(of: after[0]!) && !lost.isSubset(of: after[1]!), "spread, not all to one")
        #expect(lost.allSatisfy { leases[$0]?.epoch == 2 }, "taken over at the next epoch")
    }

    @Test func aReturningInstanceGetsItsShareBackWithNeverTwoOwners() {
        var leases = round([:], live: [0, 1, 2], now: 100)
        let share = owners(leases, now: 100)[2]!
        leases = round(leases, live: [0, 1], now: 111)
        // It returns: in the first round the others release its users (it finds them still held).
        leases = round(leases, live: [0, 1, 2], now: 115)
        #expect(owners(leases, now: 115)[2]!.isEmpty || owners(leases, now: 115)[2]!.isSubset(of: share))
        // By the next round it holds its share, at a higher epoch than the interim owner's.
        leases = round(leases, live: [0, 1, 2], now: 118)
        #expect(owners(leases, now: 118)[2] == share)
        #expect(share.allSatisfy { leases[$0]?.epoch == 3 })
    }

    @Test func theFallbackOwnerIsStableAndLive() {
        for user in users {
            let owner = LeaseOwnership.preferredOwner(of: user, instances: 3, live: [0, 2])
            #expect(owner == LeaseOwnership.preferredOwner(of: user, instances: 3, live: [2, 0]))
            #expect(owner == 0 || owner == 2)
        }
        #expect(LeaseOwnership.preferredOwner(of: "x", instances: 3, live: []) == nil)
    }
}
