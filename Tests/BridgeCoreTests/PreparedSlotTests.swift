import Dispatch
import Synchronization
import Testing
@testable import BridgeCore

/// The slot beside a shared body where the HTTP server keeps its prepared response.
@Suite struct PreparedSlotTests {
    private final class Made: Sendable {
        let number: Int
        init(_ number: Int) { self.number = number }
    }

    @Test func theFirstValueMadeIsKeptAndGivenToEveryAsker() {
        let slot = PreparedSlot()
        let makes = Atomic<Int>(0)
        let seen = Mutex<Set<ObjectIdentifier>>([])
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            let value = slot.value { () -> Made? in
                makes.add(1, ordering: .relaxed)
                return Made(index)
            }
            if let value { seen.withLock { _ = $0.insert(ObjectIdentifier(value)) } }
        }
        #expect(seen.withLock { $0.count } == 1)
        #expect(makes.load(ordering: .relaxed) >= 1)
        let kept = slot.value { () -> Made? in Made(-1) }
        #expect(kept.map { ObjectIdentifier($0) } == seen.withLock { $0.first })
    }

    @Test func nothingMadeLeavesTheSlotEmptyForTheNextAsker() {
        let slot = PreparedSlot()
        #expect(slot.value { () -> Made? in nil } == nil)
        #expect(slot.value { () -> Made? in Made(2) }?.number == 2)
    }

    @Test func theValueGoesWithTheSlot() {
        weak var gone: Made?
        do {
            let slot = PreparedSlot()
            let made = slot.value { () -> Made? in Made(1) }
            gone = made
            #expect(gone != nil)
        }
        #expect(gone == nil)
    }
}
