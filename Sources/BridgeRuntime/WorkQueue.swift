import Synchronization
/// Work handed to a feature from places that must not wait for it (the MQTT event loop,
/// libmicrohttpd's threads), done in the feature's own `run()`, inside the bridge's one task
/// group: so no work outlives shutdown and none starts a task of its own. Bounded: past
/// `capacity` waiting jobs, `submit` refuses (the caller says so) instead of queueing without end.
struct WorkQueue<Job: Sendable>: Sendable {
    let jobs: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation

    init(capacity: Int) {
        (jobs, continuation) = AsyncStream.makeStream(of: Job.self, bufferingPolicy: .bufferingOldest(capacity))
    }

    /// Ends the stream: whoever reads `jobs` stops after the jobs already queued.
    func finish() {
        continuation.finish()
    }

    /// Queues a job; false when the queue is full (or the feature has stopped).
    @discardableResult
    func submit(_ job: Job) -> Bool {
        if case .enqueued = continuation.yield(job) { return true }
        return false
    }
}

/// A request that any number of callers may make while one is pending: they coalesce into one
/// (the retained state republished after a burst of connects or Home Assistant restarts).
struct CoalescedSignal: Sendable {
    let requests: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (requests, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func request() {
        continuation.yield(())
    }
}

/// Items any number of callers add while a batch is pending, taken by `run()` as one set (users
/// taken over by lease rounds, instances gone offline): bounded by the distinct items, however
/// often they are added.
final class CoalescedSet<Element: Hashable & Sendable>: Sendable {
    private let pending = Mutex<Set<Element>>([])
    private let signal = CoalescedSignal()

    func add(_ items: some Sequence<Element>) {
        pending.withLock { $0.formUnion(items) }
        signal.request()
    }

    /// Calls `body` with everything added since its last call, until the task is cancelled.
    func forEachBatch(_ body: (Set<Element>) async -> Void) async {
        for await _ in signal.requests {
            if Task.isCancelled { return }
            let batch = pending.withLock { pending in
                defer { pending = [] }
                return pending
            }
            if !batch.isEmpty { await body(batch) }
        }
    }
}
