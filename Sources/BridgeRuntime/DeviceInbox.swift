import BridgeMQTT
import Synchronization

/// Device messages waiting to be applied, bounded: at most `perTopic` per topic (a device's
/// newer state supersedes its older one) and `total` in all (rtl_433 puts every radio device on
/// one topic, so that topic may hold more). When full, the oldest message of the topic that
/// brought the new one goes first, or the oldest of all. Order within a topic is kept.
final class DeviceInbox: Sendable {
    static let perTopic = 16
    static let total = 4_096

    private struct State {
        var queue: [MQTTMessage] = []
        var head = 0
        var perTopic: [String: Int] = [:]
        var dropped = 0
    }

    private let state = Mutex(State())

    /// Queues a message; returns the drops so far when this one caused a drop, else 0.
    func put(_ message: MQTTMessage) -> Int {
        state.withLock { state in
            var dropped = false
            let queued = state.perTopic[message.topic, default: 0]
            let limit = message.topic.hasPrefix("rtl_433/") ? Self.total : Self.perTopic
            if queued >= limit, let index = state.queue[state.head...].firstIndex(where: { $0.topic == message.topic }) {
                state.queue.remove(at: index)
                state.perTopic[message.topic, default: 1] -= 1
                dropped = true
            } else if state.queue.count - state.head >= Self.total {
                let oldest = state.queue[state.head]
                state.head += 1
                state.perTopic[oldest.topic, default: 1] -= 1
                dropped = true
            }
            state.queue.append(message)
            state.perTopic[message.topic, default: 0] += 1
            if dropped { state.dropped += 1 }
            return dropped ? state.dropped : 0
        }
    }

    /// Takes up to `max` messages, oldest first.
    func take(max: Int) -> [MQTTMessage] {
        state.withLock { state in
            let end = min(state.queue.count, state.head + max)
            let batch = Array(state.queue[state.head..<end])
            state.head = end
            for message in batch {
                let left = (state.perTopic[message.topic] ?? 1) - 1
                state.perTopic[message.topic] = left > 0 ? left : nil
            }
            if state.head == state.queue.count {
                state.queue.removeAll(keepingCapacity: true)
                state.head = 0
            } else if state.head > 1_024 {
                state.queue.removeFirst(state.head)
                state.head = 0
            }
            return batch
        }
    }

    var dropped: Int { state.withLock { $0.dropped } }
}
