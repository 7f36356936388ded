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
        guard !discovery.isEmpty,
              let device = UnboundDevices.identify(topic: message.topic, payload: message.payload, zigbeeBase: zigbeeBase),
              !claims.claim(key: device.key, rtl433: device.rtl433) else { return }
        unbound.withLock { $0.saw(topic: message.topic, payload: message.payload, zigbeeBase: zigbeeBase, at: Date()) }
    }

    /// After the bindings changed: the devices they now claim leave the list (a device bound from it
    /// is no longer unbound).
    func forgetClaimedDevices() {
        guard !discovery.isEmpty else { return }
        let claims = self.claims
        unbound.withLock { $0.forget { claims.claim(key: $0.key, rtl433: $0.rtl433) } }
    }

    /// What the current bindings claim.
    private var claims: Claims {
        let (topics, wildcardReads) = bindings.withLock { (Array($0.exactReads.keys), $0.wildcardReads) }
        return Claims(
            devices: Set(topics.compactMap { UnboundDevices.identify(topic: $0, payload: [], zigbeeBase: zigbeeBase)?.key }),
            rtl433: wildcardReads.flatMap { read in
                read.entries.compactMap { entry -> (model: String, id: String, channel: String?)? in
                    guard case .rtl433(let model, let id, let channel, _) = entry.extractor else { return nil }
                    return (model, id, channel)
                }
            })
    }

    /// The zigbee2mqtt and Tasmota devices a binding reads (a bound Tasmota plug's `tele/<topic>/STATE`
    /// is claimed even when only its `SENSOR` is read), and the rtl_433 sensors bound, which claim
    /// every event of their model and id (and channel), those without the field they read too.
    private struct Claims {
        var devices: Set<String>
        var rtl433: [(model: String, id: String, channel: String?)]

        func claim(key: String, rtl433 sensor: RTL433Sensor?) -> Bool {
            if let sensor {
                return rtl433.contains { $0.model == sensor.model && $0.id == sensor.id && ($0.channel == nil || $0.channel == sensor.channel) }
            }
            return devices.contains(key)
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
