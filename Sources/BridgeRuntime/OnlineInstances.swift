import Synchronization

/// Cluster: the other instances last seen `online` (kept by `ClusterPeers`, read by the command
/// path and the state publisher).
final class OnlineInstances: Sendable {
    private let online = Mutex<Set<Int>>([])

    /// Records an instance's state; returns whether it changed.
    func set(_ instance: Int, online isOnline: Bool) -> Bool {
        online.withLock { isOnline ? $0.insert(instance).inserted : $0.remove(instance) != nil }
    }

    func contains(_ instance: Int) -> Bool { online.withLock { $0.contains(instance) } }

    var isEmpty: Bool { online.withLock { $0.isEmpty } }

    /// Whether `index` is the lowest of the online instances and `index`.
    func isLowest(_ index: Int) -> Bool { online.withLock { $0.union([index]).min() == index } }
}
