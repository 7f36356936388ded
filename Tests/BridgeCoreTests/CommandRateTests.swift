import Testing
@testable import BridgeCore

/// The per-user command rate limit and the summaries of repeated log lines, driven by a clock of
/// plain numbers (README "Security model", "Command rate").
@Suite struct CommandRateTests {
    @Test func aBucketGivesItsBurstThenItsRate() {
        var bucket = TokenBucket(rate: 2, burst: 5)
        let admitted = (0..<100).count { _ in bucket.take(at: 1000) }
        #expect(admitted == 5)
        #expect(bucket.waitForOne == 0.5)
        let early = bucket.take(at: 1000.4)
        let onTime = bucket.take(at: 1000.5)
        #expect(!early && onTime)
        // A long quiet refills to the burst, never beyond.
        bucket.refill(at: 5000)
        #expect(bucket.isFull && bucket.tokens == 5)
        // A clock that goes back neither adds nor drains.
        bucket.refill(at: 10)
        #expect(bucket.tokens == 5)
    }

    @Test func twentyThousandCommandsInASecondAdmitTheBurstAndTheRate() {
        var limit = CommandRateLimit(rate: 10, burst: 30)
        var admitted = 0
        var lastRefusal = 0.0
        for index in 0..<20_000 {
            let now = Double(index) * (0.84 / 20_000)
            switch limit.admit(user: "1", at: now) {
            case .admitted: admitted += 1
            case .refused(let wait): lastRefusal = wait
            }
        }
        #expect(admitted == 30 + 8, "the burst, then 10 a second for 0.84 s")
        #expect(lastRefusal > 0 && lastRefusal <= 0.1)
        // Each user has a bucket of their own.
        let other = limit.admit(user: "2", at: 0.84)
        #expect(other == .admitted)
    }

    @Test func bucketsAreForgottenOnceFull() {
        var limit = CommandRateLimit(rate: 1, burst: 1)
        for user in 0..<64 { _ = limit.admit(user: String(user), at: 0) }
        #expect(limit.trackedUsers == 64)
        _ = limit.admit(user: "late", at: 10)
        #expect(limit.trackedUsers <= 1, "every bucket but the newest was full again")
    }

    @Test func repeatsAreLoggedOnceAndSummarisedPerInterval() {
        var lines = RepeatedLines(interval: 10)
        let flood = RepeatedLines.Key(subject: "1", reason: "rate_limited")
        var full = 0
        for index in 0..<19_981 where lines.record(flood, at: Double(index) / 20_000) != nil { full += 1 }
        #expect(full == 1)
        let otherUser = lines.record(.init(subject: "2", reason: "rate_limited"), at: 1)
        let otherReason = lines.record(.init(subject: "1", reason: "bad_payload"), at: 1)
        #expect(otherUser != nil && otherReason != nil, "another user or reason: a line of its own")
        let early = lines.due(at: 9.9)
        let first = lines.due(at: 10)
        let rest = lines.due(at: 11)
        #expect(early.isEmpty)
        #expect(first == [RepeatedLines.Summary(key: flood, count: 19_981, seconds: 10)])
        #expect(rest.isEmpty, "one line only, no summary, for the others")
        #expect(lines.openKeys == 0)
        let again = lines.record(flood, at: 20)
        #expect(again != nil, "a new interval starts with a full line again")
        #expect(RepeatedLines.grouped(19_980) == "19,980" && RepeatedLines.grouped(999) == "999"
            && RepeatedLines.grouped(1_000_000) == "1,000,000")
    }

    @Test func madeUpSubjectsCannotGrowTheTable() {
        var lines = RepeatedLines(interval: 10, maxKeys: 100)
        var full = 0
        for index in 0..<10_000 where lines.record(.init(subject: "user\(index)", reason: "unknown_user"), at: 0) != nil {
            full += 1
        }
        #expect(lines.openKeys == 101, "100 subjects and the one for the others")
        #expect(full == 101)
        let summaries = lines.due(at: 10)
        #expect(summaries == [RepeatedLines.Summary(key: .init(subject: "others", reason: "unknown_user"),
                                                    count: 9_900, seconds: 10)])
    }
}
