/// The kinds of sensor a room can have, with the vocabulary each one speaks.
///
/// The HTTP vocabulary is the original backend's (`"On"`, `"Detected"`, `"Okey"`); MQTT uses the
/// plain `ON`/`OFF` that Home Assistant and zigbee2mqtt users expect.
public enum SensorKind: String, Sendable, CaseIterable, Codable {
    case temperature
    case humidity
    case lights
    case movement
    case gas

    /// The id used in topics and as the lower-case icon name.
    public var id: String { rawValue }

    /// The name the seed routes show (`Temperature`).
    public var displayName: String {
        switch self {
        case .temperature: "Temperature"
        case .humidity: "Humidity"
        case .lights: "Lights"
        case .movement: "Movement"
        case .gas: "Gas"
        }
    }

    /// The unit of a numeric sensor, `nil` for on/off sensors.
    public var unit: String? {
        switch self {
        case .temperature: "°C"
        case .humidity: "%"
        case .lights, .movement, .gas: nil
        }
    }

    public var isNumeric: Bool { unit != nil }

    /// The seed words for on and off (`"On"`/`"Off"`, `"Detected"`/`"Not-Detected"`, `"Gas"`/`"Okey"`).
    public var seedWords: (on: String, off: String)? {
        switch self {
        case .temperature, .humidity: nil
        case .lights: ("On", "Off")
        case .movement: ("Detected", "Not-Detected")
        case .gas: ("Gas", "Okey")
        }
    }

    /// Finds a kind by display name or id, in any case.
    public init?(name: String) {
        guard let kind = SensorKind(rawValue: name.lowercased()) else { return nil }
        self = kind
    }
}
