@testable import BridgeMQTT
import Testing

/// The pieces of the MQTT client's fault handling that need no broker: the offline queue, the
/// backoff and the recognition of re-sent messages.
@Suite struct FaultUnitTests {
    static func message(_ topic: String, _ payload: String, retain: Bool = true) -> MQTTOutbox.Message {
        MQTTOutbox.Message(topic: topic, payload: Array(payload.utf8), qos: 1, retain: retain)
    }

    static func drain(_ outbox: inout MQTTOutbox) -> [String] {
        var out: [String] = []
        while let message = outbox.removeFirst() { out.append("\(message.topic)=\(String(decoding: message.payload, as: UTF8.self))") }
        return out
    }

    @Test func theQueueKeepsOrderAndEveryValueWhileThereIsRoom() {
        var outbox = MQTTOutbox(capacity: 10)
        for (topic, value) in [("a", "1"), ("b", "1"), ("a", "2"), ("e", "x")] {
            #expect(outbox.append(Self.message(topic, value, retain: topic != "e")) == 0)
        }
        #expect(outbox.count == 4)
        #expect(Self.drain(&outbox) == ["a=1", "b=1", "a=2", "e=x"])
        #expect(outbox.isEmpty && outbox.droppedTotal == 0)
    }

    @Test func whenFullTheOldestSupersededRetainedValueGoesFirst() {
        var outbox = MQTTOutbox(capacity: 4)
        outbox.append(Self.message("event", "e1", retain: false))
        outbox.append(Self.message("a", "1"))
        outbox.append(Self.message("b", "1"))
        outbox.append(Self.message("b", "2"))  // b=1 superseded
        #expect(outbox.append(Self.message("a", "2")) == 1)  // a=1 superseded too, and queued before b=1
        #expect(Self.drain(&outbox) == ["event=e1", "b=1", "b=2", "a=2"])
        #expect(outbox.droppedTotal == 1)
    }

    @Test func withNothingSupersededTheOldestGoes() {
        var outbox = MQTTOutbox(capacity: 3)
        for topic in ["a", "b", "c", "d"] { outbox.append(Self.message(topic, "1")) }
        #expect(Self.drain(&outbox) == ["b=1", "c=1", "d=1"])
        #expect(outbox.droppedTotal == 1)
    }

    @Test func theNewestValueOfEveryTopicSurvivesALongOutage() {
        var outbox = MQTTOutbox(capacity: 100)
        for step in 0..<10_000 {
            outbox.append(Self.message("topic/\(step % 50)", String(step)))
        }
        #expect(outbox.count == 100)
        #expect(outbox.droppedTotal == 9_900)
        let left = Self.drain(&outbox)
        for index in 0..<50 {
            #expect(left.contains("topic/\(index)=\(9_950 + index)"))
        }
    }

    /// While connected the queue is the broker's backlog and keeps every reading; when the
    /// connection goes, it is cut back to its capacity, superseded values first.
    @Test func whileConnectedNothingIsDroppedUntilTheConnectionGoes() {
        var outbox = MQTTOutbox(capacity: 3)
        for step in 0..<6 {
            #expect(outbox.append(Self.message(step < 4 ? "a" : "b", String(step)), bounded: false) == 0)
        }
        #expect(outbox.count == 6 && outbox.droppedTotal == 0)
        #expect(outbox.trim() == 3)
        #expect(Self.drain(&outbox) == ["a=3", "b=4", "b=5"])
        #expect(outbox.droppedTotal == 3)
    }

    @Test func aZeroCapacityQueueHoldsNothing() {
        var outbox = MQTTOutbox(capacity: 0)
        #expect(outbox.append(Self.message("a", "1")) == 1)
        #expect(outbox.isEmpty && outbox.droppedTotal == 1)
    }

    @Test func backoffDoublesIsCappedAndJitterOnlyShortensIt() {
        let backoff = ReconnectBackoff(minimum: 1, maximum: 10)
        #expect((1...6).map { backoff.nominalDelay(afterFailures: $0) } == [1, 2, 4, 8, 10, 10])
        #expect(backoff.nominalDelay(afterFailures: 10_000) == 10)
        for failures in 1...8 {
            for random in [0.0, 0.5, 0.999] {
                let delay = backoff.delay(afterFailures: failures, random: random)
                let nominal = backoff.nominalDelay(afterFailures: failures)
                #expect(delay <= nominal && delay >= 0.8 * nominal)
            }
        }
    }

    @Test func quickDropsInARowLookLikeATakeoverAndAStableConnectionEndsTheRun() {
        var watch = TakeoverWatch(stablePeriod: 10)
        #expect(watch.lost(after: 0.5, clientID: "b-1") == nil)
        #expect(watch.lost(after: 9.9, clientID: "b-1") == nil)
        let suspicion = watch.lost(after: 1, clientID: "b-1")
        #expect(suspicion?.contains("3 connections in a row lost within 10 s") == true)
        #expect(suspicion?.contains("client id b-1,") == true)
        #expect(watch.lost(after: 2, clientID: "b-1")?.hasPrefix("4 connections") == true)
        // A connection that lasted the stable period starts the count again.
        #expect(watch.lost(after: 10, clientID: "b-1") == nil)
        #expect(watch.quickDrops == 0)
        #expect(watch.lost(after: 1, clientID: "b-1") == nil)
        #expect(watch.lost(after: 1, clientID: "b-1") == nil)
        #expect(watch.lost(after: 1, clientID: "b-1") != nil)
    }

    @Test func resentMessagesAreRecognisedOnlyRightAfterAResumedSession() {
        var filter = RedeliveryFilter()
        filter.connected(sessionPresent: false)
        for id in 1...5 {
            let resent = filter.isRedelivery(messageID: id, qos: 1)
            #expect(!resent)
        }
        filter.connectionLost()
        filter.connected(sessionPresent: true)
        var resent: Bool
        // The broker re-sends 4 and 5 (handled, acknowledgement lost), then 6 (never seen), then new ones.
        resent = filter.isRedelivery(messageID: 4, qos: 1)
        #expect(resent)
        resent = filter.isRedelivery(messageID: 5, qos: 1)
        #expect(resent)
        resent = filter.isRedelivery(messageID: 6, qos: 1)
        #expect(!resent)
        resent = filter.isRedelivery(messageID: 1, qos: 1)
        #expect(!resent, "the window closed at the first new id")
        // A fresh session (broker restarted without persistence) re-sends nothing.
        filter.connectionLost()
        filter.connected(sessionPresent: false)
        resent = filter.isRedelivery(messageID: 6, qos: 1)
        #expect(!resent)
        // QoS 0 has no packet id to go by.
        filter.connectionLost()
        filter.connected(sessionPresent: true)
        resent = filter.isRedelivery(messageID: 0, qos: 0)
        #expect(!resent)
    }
}
