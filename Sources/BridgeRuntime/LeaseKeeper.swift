import BridgeCore
import BridgeStorage
import Foundation
import Synchronization

/// Cluster on PostgreSQL (docs/scaling.md, "Leases"): keeps this instance's heartbeat and its
/// leases on users' ownership in the database, every `cluster.lease / 3`, taking and handing back
/// leases as `LeaseOwnership` decides. What it holds fences the writes that must happen once per
/// user across instances (an alarm's occurrence).
final class LeaseKeeper: BridgeFeature {
    let name = "cluster-leases"
    private let store: LeaseStore
    private let instances: Int
    private let index: Int
    private let users: [String]
    private let duration: Double
    private let logger: Logger
    /// Follows what this instance holds: everything a user's owner does moves with the lease.
    private let ownership: Ownership
    /// The users whose lease this instance holds, with the epoch it holds it at.
    private let held = Mutex<[String: Int64]>([:])
    /// Rounds that took a lease: work kept for the users this instance owns (the alarm scheduler's
    /// alarms due soon) is read again when it moves.
    private let acquisitions = Mutex(0)

    var acquisitionRounds: Int { acquisitions.withLock { $0 } }

    init(store: LeaseStore, configuration: BridgeConfiguration, ownership: Ownership, logger: Logger) {
        self.store = store
        self.ownership = ownership
        instances = configuration.cluster.instances
        index = configuration.cluster.index
        users = configuration.users.map(\.id)
        duration = configuration.cluster.lease
        self.logger = logger
    }

    /// The fence for a write for `user`, nil when this instance does not hold the user's lease.
    func fence(for user: String) -> LeaseFence? {
        held.withLock { $0[user] }.map { LeaseFence(user: user, instance: index, epoch: $0) }
    }

    /// Where the rounds' blocking database calls run: a serial Dispatch queue, off Swift's
    /// cooperative pool, so a slow database stalls neither the MQTT event loop nor the other
    /// features (docs/architecture.md, "Threads").
    private let queue = DispatchQueue(label: "cluster-leases")

    private func offThePool(_ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async {
                work()
                done.resume()
            }
        }
    }

    func run() async {
        while !Task.isCancelled {
            await offThePool { self.round(now: Date()) }
            do { try await Task.sleep(for: .milliseconds(Int(duration / 3 * 1000))) } catch { break }
        }
    }

    /// A clean stop hands everything back at once, so the others need not wait for the leases to expire.
    func shutdown() async {
        let now = Date()
        let leases = held.withLock { current -> [String: Int64] in
            defer { current.removeAll() }
            return current
        }
        ownership.update(holders: [:])
        await offThePool { [store, index, logger] in
            do throws(StorageError) {
                _ = try store.keep(instance: index, until: now, renew: [:], release: leases)
            } catch {
                logger.warning("cannot hand back the leases; the others take over once they expire",
                               ["error": error.description])
            }
        }
    }

    /// One round: read, decide, then the heartbeat, renewals and hand-backs in one transaction
    /// and each take on its own (docs/scaling.md, "Leases").
    func round(now: Date) {
        do {
            let live = try store.liveInstances(now: now)
            let leases = try store.leases()
            let steps = LeaseOwnership.steps(me: index, instances: instances, live: live, users: users, leases: leases,
                                             now: now.timeIntervalSince1970)
            var holders = leases.filter { $0.value.isHeld(at: now.timeIntervalSince1970) }.mapValues(\.instance)
            var renew: [String: Int64] = [:], release: [String: Int64] = [:], acquire: [String: Int64] = [:]
            for step in steps {
                switch step {
                case .acquire(let user, let epoch): acquire[user] = epoch
                case .renew(let user, let epoch): renew[user] = epoch
                case .release(let user, let epoch): release[user] = epoch
                }
            }
            // Stop acting for a user before its lease is free for another instance to take.
            ownership.update(holders: holders.filter { release[$0.key] == nil })
            // Expiry counts from the write, not from the round's start, so a slow read costs no lease time.
            let kept = try store.keep(instance: index, until: Date().addingTimeInterval(duration), renew: renew,
                                      release: release)
            var next = renew.filter { kept.renewed.contains($0.key) }
            var taken = 0
            for (user, epoch) in acquire.sorted(by: { $0.key < $1.key }) {
                guard try store.apply(.acquire(user: user, epoch: epoch), instance: index, now: Date(),
                                      duration: duration) else { continue }
                next[user] = epoch
                taken += 1
            }
            // What this round left this instance holding replaces what it had read.
            holders = holders.filter { $0.value != index }.merging(next.mapValues { _ in index }) { $1 }
            let before = held.withLock { current -> Int in
                defer { current = next }
                return current.count
            }
            ownership.update(holders: holders)
            if taken > 0 { acquisitions.withLock { $0 += 1 } }
            if taken > 0 && before > 0 || !kept.released.isEmpty {
                logger.info("cluster leases changed", ["taken": String(taken), "handed_back": String(kept.released.count),
                                                       "held": String(next.count), "live": String(live.count)])
            }
        } catch {
            // Not renewed: the leases run out on their own and the fence refuses writes after that.
            logger.error("cannot renew the cluster leases", ["error": error.description])
        }
    }
}
