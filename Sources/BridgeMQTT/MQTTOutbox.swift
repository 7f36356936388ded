/// Messages waiting for the broker, oldest first, bounded by `capacity` while the broker is away.
///
/// Publishes wait here while the client is not connected (and, while connected, when
/// `maxInflight` messages are already unacknowledged), so what libmosquitto holds stays small and
/// this queue decides what to give up when the broker is away for long. While connected nothing
/// is dropped (`append(_:bounded: false)`): the broker is draining the queue and producers wait
/// for it; `trim()` brings the queue back within `capacity` when the connection is lost. When it is full, the
/// oldest *superseded* message goes first: a retained message for a topic that has a newer
/// retained message queued behind it (only the newest value of a retained topic matters to a
/// subscriber that arrives later). Only when nothing is superseded does the oldest message go.
/// Order is kept: messages leave in the order they were queued.
struct MQTTOutbox {
    struct Message {
        var topic: String
        var payload: [UInt8]
        var qos: Int
        var retain: Bool
    }

    /// The most messages held; 0 holds none.
    let capacity: Int
    /// Messages dropped since the outbox was made.
    private(set) var droppedTotal = 0

    /// Queued messages by sequence number; sequence numbers grow with every append, so
    /// `head..<next` is queue order (with gaps where messages were dropped).
    private var entries: [UInt64: Message] = [:]
    private var head: UInt64 = 0
    private var next: UInt64 = 0
    /// The sequence number of the newest queued retained message of each topic.
    private var newestRetained: [String: UInt64] = [:]
    /// Sequence numbers of superseded messages (some may have left already), oldest on top.
    private var superseded = MinHeap()

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// Queues `message` at the end; when `bounded`, drops what must go to stay within `capacity`.
    /// - Returns: how many messages were dropped (possibly `message` itself when capacity is 0).
    @discardableResult
    mutating func append(_ message: Message, bounded: Bool = true) -> Int {
        guard capacity > 0 || !bounded else {
            droppedTotal += 1
            return 1
        }
        let sequence = next
        next += 1
        if message.retain {
            if let previous = newestRetained[message.topic], entries[previous] != nil {
                superseded.push(previous)
            }
            newestRetained[message.topic] = sequence
        }
        entries[sequence] = message
        return bounded ? trim() : 0
    }

    /// Drops what must go to bring the queue within `capacity`; returns how many.
    @discardableResult
    mutating func trim() -> Int {
        var dropped = 0
        while entries.count > capacity {
            dropOne()
            dropped += 1
        }
        return dropped
    }

    /// The oldest message, without removing it.
    var first: Message? {
        var sequence = head
        while sequence < next {
            if let message = entries[sequence] { return message }
            sequence += 1
        }
        return nil
    }

    /// Removes and returns the oldest message.
    mutating func removeFirst() -> Message? {
        while head < next {
            let sequence = head
            head += 1
            if let message = entries.removeValue(forKey: sequence) {
                forget(message, sequence: sequence)
                return message
            }
        }
        return nil
    }

    /// Drops the oldest superseded message, or the oldest message when none is superseded.
    private mutating func dropOne() {
        while let sequence = superseded.popMin() {
            if let message = entries.removeValue(forKey: sequence) {
                forget(message, sequence: sequence)
                droppedTotal += 1
                return
            }
        }
        if removeFirst() != nil { droppedTotal += 1 }
    }

    private mutating func forget(_ message: Message, sequence: UInt64) {
        if message.retain, newestRetained[message.topic] == sequence {
            newestRetained.removeValue(forKey: message.topic)
        }
        if entries.isEmpty {
            // Nothing left: stale bookkeeping goes too, so it never outgrows the queue.
            newestRetained.removeAll(keepingCapacity: true)
            superseded.removeAll()
            head = next
        } else if superseded.count > 2 * entries.count + 1024 {
            superseded.rebuild(keeping: { entries[$0] != nil })
        }
    }
}

/// A binary min-heap of sequence numbers.
struct MinHeap {
    private var items: [UInt64] = []

    var count: Int { items.count }

    mutating func push(_ value: UInt64) {
        items.append(value)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popMin() -> UInt64? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < items.count, items[left] < items[smallest] { smallest = left }
                if right < items.count, items[right] < items[smallest] { smallest = right }
                if smallest == parent { break }
                items.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }

    mutating func removeAll() { items.removeAll(keepingCapacity: true) }

    mutating func rebuild(keeping keep: (UInt64) -> Bool) {
        let kept = items.filter(keep).sorted()
        items = kept  // a sorted array is a valid heap
    }
}
