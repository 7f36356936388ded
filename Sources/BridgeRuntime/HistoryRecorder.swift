import BridgeStorage
import Foundation
import Synchronization

/// Collects published readings from the state bus and writes them to the database in batches,
/// once a second, so recording history costs one transaction per second rather than one per
/// reading; deletes readings older than `storage.retention_days`, at start and then hourly.
final class HistoryRecorder: BridgeFeature, StateSubscriber {
    let name = "history"
    /// Rows held while the database can't keep up; past this the oldest are dropped (and logged).
    static let maxPending = 200_000

    private let pending = Mutex<[HistoryStore.Row]>([])
    private let store: HistoryStore
    private let logger: Logger
    private let retentionDays: Int

    init(store: HistoryStore, retentionDays: Int, logger: Logger) {
        self.store = store
        self.retentionDays = retentionDays
        self.logger = logger
    }

    /// Every published reading is recorded (a mirrored one is its owner's to record).
    func receive(_ changes: [StateChange]) {
        var rows: [HistoryStore.Row] = []
        for case .reading(let change) in changes where change.published {
            rows.append(HistoryStore.Row(user: change.key.user, room: change.key.room, sensor: change.sensor.id,
                                         time: change.time, value: change.value.mqttPayload))
        }
        add(rows)
    }

    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.run(interval: 1) }
            group.addTask { await self.pruneHourly() }
        }
    }

    private func pruneHourly() async {
        while !Task.isCancelled {
            let cutoff = Date().addingTimeInterval(-Double(retentionDays) * 86_400)
            do {
                let pruned = try store.prune(before: cutoff)
                if pruned > 0 { logger.info("pruned old history", ["rows": String(pruned)]) }
            } catch {
                logger.error("cannot prune history", ["error": error.description])
            }
            do { try await Task.sleep(for: .seconds(3600)) } catch { break }
        }
    }

    func add(_ rows: [HistoryStore.Row]) {
        enqueue(rows, first: false)
    }

    /// Queues rows, at the back (new readings) or at the front (a batch that could not be written).
    private func enqueue(_ rows: [HistoryStore.Row], first: Bool) {
        guard !rows.isEmpty else { return }
        let dropped = pending.withLock { queue -> Int in
            if first { queue.insert(contentsOf: rows, at: 0) } else { queue.append(contentsOf: rows) }
            let excess = queue.count - HistoryRecorder.maxPending
            if excess > 0 { queue.removeFirst(excess) }
            return max(0, excess)
        }
        if dropped > 0 { logger.warning("history writes are behind; dropped oldest readings", ["count": String(dropped)]) }
    }

    /// Writes everything collected so far.
    func flush() {
        let batch = pending.withLock { queue -> [HistoryStore.Row] in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        do {
            try store.append(batch)
        } catch {
            logger.error("cannot record history", ["rows": String(batch.count), "error": error.description,
                                                   "kept": String(error.connectionLost)])
            // The database was unreachable (PostgreSQL restarting): the batch is written with the
            // next one. Nothing of it was committed, unless the connection broke during its COMMIT;
            // then its readings are already there and are not recorded twice (README "PostgreSQL").
            if error.connectionLost { enqueue(batch, first: true) }
        }
    }

    /// Flushes every `interval` seconds until cancelled, then once more.
    func run(interval: Double) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) } catch { break }
            flush()
        }
        flush()
    }
}
