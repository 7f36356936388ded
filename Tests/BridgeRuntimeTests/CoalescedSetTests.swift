import Synchronization
import Testing
@testable import BridgeRuntime

/// Work handed to a feature's `run()` as sets (docs/architecture.md):
/// what is added while a batch waits joins it, each item once.
@Suite struct CoalescedSetTests {
    @Test func addsWhileABatchWaitsJoinItAndCancellationEndsTheLoop() async {
        let set = CoalescedSet<String>()
        set.add(["1", "2"])
        set.add(["2", "3"])
        let batches = Mutex<[Set<String>]>([])
        await set.forEachBatch { batch in
            let count = batches.withLock { $0.append(batch); return $0.count }
            if count == 1 {
                set.add(["4"])
            } else {
                withUnsafeCurrentTask { $0?.cancel() }
                set.add(["5"])  // wakes the loop, which sees the cancellation and stops
            }
        }
        #expect(batches.withLock { $0 } == [["1", "2", "3"], ["4"]])
    }
}
