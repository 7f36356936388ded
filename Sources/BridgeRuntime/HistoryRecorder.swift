import BridgeStorage
import Foundation
import Synchronization

/// Collects published readings and writes them to the database in batches, once a second, so
/// recording history costs one transaction per second rather than one per reading.
final class HistoryRecorder: Sendable {
    /// Rows held while the database can't keep up; past this the oldest are dropped (and logged).
    static let maxPending = 200_000

    private let pending = Mutex<[HistoryStore.Row]>([])
    private let store: HistoryStore
    private let logger: Logger

    init(store: HistoryStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    func add(_ rows: [HistoryStore.Row]) {
        guard !rows.isEmpty else { return }
        let dropped = pending.withLock { queue -> Int in
            queue.append(contentsOf: rows)
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
            logger.error("cannot record history", ["rows": String(batch.count), "error": error.description])
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
