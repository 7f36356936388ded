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
