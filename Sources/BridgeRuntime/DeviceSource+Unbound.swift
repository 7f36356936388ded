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
            MQTTTopicFilter.isWildcard(filter)
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
        guard !discovery.isEmpty,
              let device = UnboundDevices.identify(topic: message.topic, payload: message.payload, zigbeeBase: zigbeeBase),
              !claims.withLock({ $0.claim(key: device.key, rtl433: device.rtl433) }) else { return }
        unbound.withLock { $0.saw(topic: message.topic, payload: message.payload, zigbeeBase: zigbeeBase, at: Date()) }
    }

    /// After the bindings changed: the devices they now claim leave the list (a device bound from it
    /// is no longer unbound).
    func forgetClaimedDevices() {
        guard !discovery.isEmpty else { return }
        let claims = self.claims.withLock { $0 }
        unbound.withLock { $0.forget { claims.claim(key: $0.key, rtl433: $0.rtl433) } }
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

/// What a set of bindings claims of the devices heard on the presets' topics: made once per set of
/// bindings (at the start and at each rebind), not for every unclaimed message.
struct DeviceClaims: Sendable {
    /// The zigbee2mqtt and Tasmota devices a binding reads (a bound Tasmota plug's `tele/<topic>/STATE`
    /// is claimed even when only its `SENSOR` is read).
    var devices: Set<String>
    /// The rtl_433 sensors bound, which claim every event of their model and id (and channel), those
    /// without the field they read too; a nil channel claims every channel.
    var rtl433: [RTL433Sensor]

    init(_ bindings: DeviceBindings, zigbeeBase: String) {
        devices = Set(bindings.exactReads.keys.compactMap {
            UnboundDevices.identify(topic: $0, payload: [], zigbeeBase: zigbeeBase)?.key
        })
        rtl433 = bindings.wildcardReads.flatMap { read in
            read.entries.compactMap { entry -> RTL433Sensor? in
                guard case .rtl433(let model, let id, let channel, _) = entry.extractor else { return nil }
                return RTL433Sensor(model: model, id: id, channel: channel)
            }
        }
    }

    func claim(key: String, rtl433 sensor: RTL433Sensor?) -> Bool {
        guard let sensor else { return devices.contains(key) }
        return rtl433.contains { $0.model == sensor.model && $0.id == sensor.id && ($0.channel == nil || $0.channel == sensor.channel) }
    }
}
