import Foundation

/// A device heard on a preset's topic that no binding claims (README, "Admins and unbound devices"):
/// what to bind a new or replaced device to.
public struct UnboundDevice: Sendable, Equatable {
    /// `zigbee2mqtt`, `tasmota` or `rtl_433`.
    public var preset: String
    /// The binding that would claim it, as in the config: `{"zigbee2mqtt":{"device":"hall_motion"}}`.
    public var binding: JSONValue
    public var topic: String
    /// The last payload, at most `UnboundDevices.maxPayloadBytes` bytes of it, as text.
    public var payload: String
    public var lastSeen: Date
    /// Which device it is (`zigbee2mqtt hall_motion`), as `UnboundDevices.identify` names it.
    public var key: String
    /// For an rtl_433 sensor: its model, id and channel, which a binding claims it by.
    public var rtl433: RTL433Sensor?

    public var json: JSONValue {
        .object([
            ("preset", .string(preset)), ("binding", binding), ("topic", .string(topic)),
            ("payload", .string(payload)), ("lastSeen", .string(Timestamp.iso8601(lastSeen))),
        ])
    }
}

/// An rtl_433 sensor as its events name it.
public struct RTL433Sensor: Sendable, Equatable {
    public var model: String
    public var id: String
    public var channel: String?

    public init(model: String, id: String, channel: String?) {
        self.model = model
        self.id = id
        self.channel = channel
    }
}

/// The unbound devices seen lately, at most `capacity` of them: a new one beyond that evicts the one
/// heard from longest ago, so a flood of made-up device names costs bounded memory.
public struct UnboundDevices: Sendable {
    public static let defaultCapacity = 100
    public static let maxPayloadBytes = 1024

    public let capacity: Int
    private var devices: [String: UnboundDevice] = [:]

    public init(capacity: Int = UnboundDevices.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    /// The filters to listen on for devices of each preset (`zigbeeBase`: `devices.zigbee2mqtt.base_topic`).
    public static func filters(zigbeeBase: String) -> [String] {
        ["\(zigbeeBase)/+", "tele/+/SENSOR", "tele/+/STATE", "rtl_433/+/events"]
    }

    /// The device a message on one of `filters` comes from, and the binding that would claim it; nil
    /// for anything else (zigbee2mqtt's own `bridge` topic, an rtl_433 event without model and id).
    public static func identify(topic: String, payload: [UInt8], zigbeeBase: String)
        -> (key: String, preset: String, binding: JSONValue, rtl433: RTL433Sensor?)?
    {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let base = zigbeeBase.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if levels.count == base.count + 1, Array(levels.prefix(base.count)) == base,
           let device = levels.last, !device.isEmpty, device != "bridge" {
            return ("zigbee2mqtt \(device)", "zigbee2mqtt", .object([("zigbee2mqtt", .object([("device", .string(device))]))]), nil)
        }
        if levels.count == 3, levels[0] == "tele", levels[2] == "SENSOR" || levels[2] == "STATE", !levels[1].isEmpty {
            return ("tasmota \(levels[1])", "tasmota", .object([("tasmota", .object([("topic", .string(levels[1]))]))]), nil)
        }
        if levels.count == 3, levels[0] == "rtl_433", levels[2] == "events", let sensor = rtl433Sensor(payload) {
            var members: [(String, JSONValue)] = [("model", .string(sensor.model)), ("id", .string(sensor.id))]
            if let channel = sensor.channel { members.append(("channel", .string(channel))) }
            return ("rtl_433 \(sensor.model) \(sensor.id) \(sensor.channel ?? "")", "rtl_433",
                    .object([("rtl_433", .object(members))]), sensor)
        }
        return nil
    }

    /// The sensor an rtl_433 event is from: its `model`, `id` and `channel` as text.
    public static func rtl433Sensor(_ payload: [UInt8]) -> RTL433Sensor? {
        guard let object = DevicePayload.json(payload) as? [String: Any],
              let model = DevicePayload.scalarText(object["model"]), let id = DevicePayload.scalarText(object["id"])
        else { return nil }
        return RTL433Sensor(model: model, id: id, channel: DevicePayload.scalarText(object["channel"]))
    }

    /// Notes a message no binding claimed; ignored unless `identify` knows its device.
    public mutating func saw(topic: String, payload: [UInt8], zigbeeBase: String, at time: Date) {
        guard let (key, preset, binding, sensor) = Self.identify(topic: topic, payload: payload, zigbeeBase: zigbeeBase) else {
            return
        }
        if devices[key] == nil, devices.count >= capacity,
           let oldest = devices.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key {
            devices[oldest] = nil
        }
        devices[key] = UnboundDevice(preset: preset, binding: binding, topic: topic,
                                     payload: Self.text(payload), lastSeen: time, key: key,
                                     rtl433: sensor)
    }

    /// Forgets the devices a binding now claims, so that a device just bound leaves the list.
    public mutating func forget(where claimed: (UnboundDevice) -> Bool) {
        devices = devices.filter { !claimed($0.value) }
    }

    /// Newest first.
    public var list: [UnboundDevice] {
        devices.values.sorted { ($0.lastSeen, $1.topic) > ($1.lastSeen, $0.topic) }
    }

    public var count: Int { devices.count }

    /// The payload as text, cut at `maxPayloadBytes` on a character's boundary.
    static func text(_ payload: [UInt8]) -> String {
        var end = min(payload.count, maxPayloadBytes)
        // Step back over continuation bytes (10xxxxxx) so a multi-byte character isn't split.
        while end < payload.count, end > 0, payload[end] & 0xC0 == 0x80 { end -= 1 }
        return String(decoding: payload[..<end], as: UTF8.self)
    }
}
