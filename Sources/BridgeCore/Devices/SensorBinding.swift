/// How a bound sensor reads a real device (README, "Connect your devices"): one of the presets,
/// each shorthand for a generic binding in that device's own conventions, or a generic MQTT or
/// HTTP binding.
public enum SensorBinding: Sendable, Equatable {
    /// zigbee2mqtt: `<base>/<device>` JSON, `field` or the sensor's usual one.
    case zigbee2mqtt(device: String, field: String?)
    /// Tasmota: `tele/<topic>/SENSOR` (`sensor` block, else the first with the field), power on
    /// `POWER<relay>` (`POWER` without a relay).
    case tasmota(topic: String, sensor: String?, relay: Int?)
    /// Shelly Gen2+ over MQTT: `<prefix>/status/<component>:<id>`.
    case shelly(prefix: String, id: Int)
    /// ESPHome: `<prefix>/<component>/<object_id>/state`.
    case esphome(prefix: String, component: String?, objectID: String)
    /// rtl_433's JSON events on `rtl_433/+/events`, by `model`, `id` and `channel`.
    case rtl433(model: String, id: String, channel: String?, field: String?)
    /// Any MQTT topic and JSON pointer.
    case mqtt(MQTTBinding)
    /// Any HTTP JSON endpoint, polled.
    case http(HTTPBinding)

    /// The config key naming the binding (`zigbee2mqtt`, ..., `mqtt`, `http`).
    public var key: String {
        switch self {
        case .zigbee2mqtt: "zigbee2mqtt"
        case .tasmota: "tasmota"
        case .shelly: "shelly"
        case .esphome: "esphome"
        case .rtl433: "rtl_433"
        case .mqtt: "mqtt"
        case .http: "http"
        }
    }

    /// Whether the binding can switch a light (rtl_433 only receives).
    public var canCommand: Bool {
        switch self {
        case .rtl433: false
        case .mqtt(let binding): binding.commandTopic != nil
        case .http(let binding): binding.command != nil
        default: true
        }
    }
}

/// A generic MQTT binding: where the value comes from, and for a light where commands go.
public struct MQTTBinding: Sendable, Equatable {
    public var topic: String?
    /// Into a JSON payload; nil: the whole payload is the value.
    public var value: JSONPointer?
    /// The words meaning ON and OFF for a binary sensor (besides ON/OFF, true/false, 1/0).
    public var on: [String] = []
    public var off: [String] = []
    public var commandTopic: String?
    public var payloadOn = "ON"
    public var payloadOff = "OFF"
    /// Where a light reports its state (default `topic`), and the pointer into it.
    public var stateTopic: String?
    public var stateValue: JSONPointer?
    /// The device never reports: a command is taken as done when sent.
    public var optimistic = false
    public var availabilityTopic: String?
    public var payloadAvailable = "online"
    public var payloadNotAvailable = "offline"

    public init() {}
}

/// A generic HTTP binding: `GET url` every `interval`, `value` pointing into the JSON answer.
public struct HTTPBinding: Sendable, Equatable {
    public struct Command: Sendable, Equatable {
        public var method = "POST"
        public var url: String
        /// `{state}` becomes `ON`/`OFF`.
        public var body: String?

        public init(url: String) {
            self.url = url
        }
    }

    public var url: String
    public var value: JSONPointer?
    /// Seconds; nil: `source.interval`.
    public var interval: Double?
    public var timeout: Double = 5
    public var headers: [(String, String)] = []
    public var command: Command?

    public init(url: String) {
        self.url = url
    }

    public static func == (lhs: HTTPBinding, rhs: HTTPBinding) -> Bool {
        lhs.url == rhs.url && lhs.value == rhs.value && lhs.interval == rhs.interval && lhs.timeout == rhs.timeout
            && lhs.headers.map { $0.0 + ":" + $0.1 } == rhs.headers.map { $0.0 + ":" + $0.1 } && lhs.command == rhs.command
    }
}

/// A bound sensor: its binding and what every binding may add.
public struct BoundSensor: Sendable, Equatable {
    public var binding: SensorBinding
    /// No reading for this long marks the sensor stale (and its room unavailable).
    public var expireAfter: Double?
    /// value = raw × scale + offset, then converted to the sensor's unit.
    public var offset = 0.0
    public var scale = 1.0
    /// Decimals kept (rounded), nil: as the device sent it.
    public var precision: Int?
    /// The unit the device reports in (`°F` is converted to °C), nil: the sensor's own.
    public var unit: String?

    public init(binding: SensorBinding) {
        self.binding = binding
    }
}
