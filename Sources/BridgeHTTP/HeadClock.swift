import Glibc
import Synchronization

/// Where one connection's request head stands: when the head now awaited started and whether it is
/// complete. The connection keeps it itself (in its `ConnectionContext`) because it changes twice per
/// request: MHD serves a connection from one thread at a time, which writes it without a lock, and
/// `ConnectionGuard` reads it when it sweeps or admits, instead of every request taking the one lock
/// all connections share (docs/performance.md, "Fewer shared locks").
final class HeadClock: Sendable {
    /// Nanoseconds of `CLOCK_MONOTONIC` at the head's start, shifted left by one; the low bit is set
    /// while the head is complete.
    private let state: Atomic<UInt64>

    init(startedAt seconds: Double) {
        state = Atomic(Self.encode(seconds))
    }

    /// The head is complete: the request is being read or served, and no head deadline applies.
    func headCompleted() {
        // Only the connection's own thread writes, so the load and the store need not be one step.
        state.store(state.load(ordering: .relaxed) | 1, ordering: .releasing)
    }

    /// The request ended: on a kept-alive connection the next head's deadline counts from `seconds`.
    func requestFinished(at seconds: Double) {
        state.store(Self.encode(seconds), ordering: .releasing)
    }

    var current: (started: Double, complete: Bool) {
        let value = state.load(ordering: .acquiring)
        return (Double(value >> 1) / 1e9, value & 1 == 1)
    }

    private static func encode(_ seconds: Double) -> UInt64 {
        UInt64(max(seconds, 0) * 1e9) << 1
    }

    /// Seconds of `CLOCK_MONOTONIC`, the clock every head deadline is counted on.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
