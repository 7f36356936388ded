import BridgeCore
import BridgeMQTT
import Foundation

/// Unbound devices (README, "Admins and unbound devices"): with an admin configured, the source also
/// listens on the presets' topics and keeps, bounded, the devices whose messages no binding claims.
extension DeviceSource {
    /// What the source subscribes to: the bound sensors' topics and, with discovery, the presets'
    /// filters; a bound topic a filter already covers is left out, so no message arrives twice.
    var subscribedFilters: [String] { Self.subscribed(deviceFilters, discovery: discovery) }

    /// The filters to subscribe for the bound sensors' topics and filters `bound`: those and the
    /// presets' filters `discovery`, without a bound topic one of those covers.
    static func subscribed(_ bound: [String], discovery: [String]) -> [String] {
        var filters = bound.filter { filter in
            filter.contains("+") || filter.contains("#")
                || !discovery.contains { MQTTTopicFilter.matches($0, topic: filter) }
        }
        for filter in discovery where !filters.contains(filter) { filters.append(filter) }
        return filters
    }

    /// What a change of the bound topics from `old` to `new` subscribes and unsubscribes: the
    /// presets' filters are subscribed either way, so a binding that went never takes one away.
    static func resubscription(from old: [String], to new: [String], discovery: [String])
        -> (subscribe: [String], unsubscribe: [String])
    {
        let before = Set(subscribed(old, discovery: discovery)), after = Set(subscribed(new, discovery: discovery))
        return (after.subtracting(before).sorted(), before.subtracting(after).sorted())
    }

    /// A message that no binding claimed.
    func noteUnbound(_ message: MQTTMessage) {
        guard !discovery.isEmpty, !isBoundRTL433(message),
              let device = UnboundDevices.identify(topic: message.topic, payload: message.payload, zigbeeBase: zigbeeBase),
              !boundDevices.contains(device.key) else { return }
        unbound.withLock { $0.saw(topic: message.topic, payload: message.payload, zigbeeBase: zigbeeBase, at: Date()) }
    }

    /// The zigbee2mqtt and Tasmota devices a binding reads: a bound Tasmota plug's `tele/<topic>/STATE`
    /// is claimed even when only its `SENSOR` is read.
    private var boundDevices: Set<String> {
        let topics = bindings.withLock { Array($0.exactReads.keys) }
        return Set(topics.compactMap { UnboundDevices.identify(topic: $0, payload: [], zigbeeBase: zigbeeBase)?.key })
    }

    /// Whether an rtl_433 event is from a bound sensor, which claims every event of its model and id
    /// (and channel), those without the field it reads too.
    private func isBoundRTL433(_ message: MQTTMessage) -> Bool {
        guard message.topic.hasPrefix("rtl_433/"), let sensor = UnboundDevices.rtl433Sensor(message.payload) else {
            return false
        }
        let wildcardReads = bindings.withLock { $0.wildcardReads }
        return wildcardReads.contains { read in
            read.entries.contains { entry in
                guard case .rtl433(let model, let id, let channel, _) = entry.extractor else { return false }
                return model == sensor.model && id == sensor.id && (channel == nil || channel == sensor.channel)
            }
        }
    }

    /// Newest first, for `GET /api/v1/devices/unbound`.
    var unboundDevices: [UnboundDevice] {
        unbound.withLock { $0.list }
    }

    /// Payload errors so far, per sensor (for `/metrics`).
    var payloadErrors: [(RoomKey, String, Int)] {
        state.withLock { state in
            state.errors.map { ($0.key.room, $0.key.sensor, $0.value) }
                .sorted { ($0.0.user, $0.0.room, $0.1) < ($1.0.user, $1.0.room, $1.1) }
        }
    }
}
