import Foundation

/// Who published what, read from mosquitto's debug log (`TestBroker(logPublishes: true)`): a
/// subscriber cannot tell publishers apart on MQTT 3.1.1 (a message carries no sender), the broker
/// can. Each `Received PUBLISH from <client id> (…, '<topic>', …)` line is one publish, stamped
/// with the broker's clock in whole seconds.
struct BrokerPublishLog {
    struct Publish: Equatable {
        var second: Int
        var client: String
        var topic: String
    }

    /// Every publish logged so far, in the broker's order.
    let publishes: [Publish]

    init(publishes: [Publish]) {
        self.publishes = publishes
    }

    init(broker: TestBroker) throws {
        let data = try Data(contentsOf: broker.logURL)
        publishes = data.split(separator: UInt8(ascii: "\n")).compactMap(Self.publish(in:))
    }

    /// Those from `second` on.
    func since(_ second: Int) -> BrokerPublishLog {
        BrokerPublishLog(publishes: publishes.filter { $0.second >= second })
    }

    private static let marker = Array(": Received PUBLISH from ".utf8)

    /// `1796138006: Received PUBLISH from <client> (d0, q1, r1, m1, '<topic>', ... (4 bytes))`.
    private static func publish(in line: Data.SubSequence) -> Publish? {
        let bytes = Array(line)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              bytes[colon...].starts(with: marker),
              let second = Int(String(decoding: bytes[..<colon], as: UTF8.self)) else { return nil }
        let rest = bytes[(colon + marker.count)...]
        guard let space = rest.firstIndex(of: UInt8(ascii: " ")),
              let open = rest.firstIndex(of: UInt8(ascii: "'")),
              let close = rest[(open + 1)...].firstIndex(of: UInt8(ascii: "'")) else { return nil }
        return Publish(second: second, client: String(decoding: rest[..<space], as: UTF8.self),
                       topic: String(decoding: rest[(open + 1)..<close], as: UTF8.self))
    }

    /// For each topic `include` picks, the publishers in the broker's order with repeats merged
    /// (`[a, a, b, a]` → `[a, b, a]`), `publisher` naming each client (nil: not counted).
    func publisherRuns(topics include: (String) -> Bool, publisher: (String) -> Int?) -> [String: [Int]] {
        var runs: [String: [Int]] = [:]
        for publish in publishes where include(publish.topic) {
            guard let instance = publisher(publish.client) else { continue }
            if runs[publish.topic]?.last != instance { runs[publish.topic, default: []].append(instance) }
        }
        return runs
    }

    /// The (topic, second) pairs in `seconds` where more than one publisher sent the topic, with them.
    func sharedSeconds(topics include: (String) -> Bool, in seconds: ClosedRange<Int>,
                       publisher: (String) -> Int?) -> [String: Set<Int>] {
        var senders: [String: Set<Int>] = [:]
        for publish in publishes where seconds.contains(publish.second) && include(publish.topic) {
            guard let instance = publisher(publish.client) else { continue }
            senders["\(publish.topic) @\(publish.second)", default: []].insert(instance)
        }
        return senders.filter { $0.value.count > 1 }
    }
}
