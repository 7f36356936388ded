/// A kind of sensor, with the vocabulary it speaks.
///
/// The five the original backend had are known (`temperature`, ...); any other name an upstream
/// reports becomes a generic sensor whose value passes through as text. The HTTP vocabulary is the
/// original backend's (`"On"`, `"Detected"`, `"Okey"`); MQTT uses the plain `ON`/`OFF` that Home
/// Assistant and zigbee2mqtt users expect.
public struct SensorKind: Hashable, Sendable, CustomStringConvertible {
    /// The id used in topics and as the lower-case icon name.
    public let id: String
    /// The name the seed routes show (`Temperature`).
    public let displayName: String

    private init(id: String, displayName: String) {
        self.id = id
        self.displayName = displayName
    }

    public static let temperature = SensorKind(id: "temperature", displayName: "Temperature")
    public static let humidity = SensorKind(id: "humidity", displayName: "Humidity")
    public static let lights = SensorKind(id: "lights", displayName: "Lights")
    public static let movement = SensorKind(id: "movement", displayName: "Movement")
    public static let gas = SensorKind(id: "gas", displayName: "Gas")

    /// The sensors the bridge knows, which a config may list and the simulator simulates.
    public static let known: [SensorKind] = [.temperature, .humidity, .lights, .movement, .gas]

    /// A known kind by display name or id, in any case.
    public init?(name: String) {
        guard let kind = SensorKind.known.first(where: { $0.id == name.lowercased() }) else { return nil }
        self = kind
    }

    /// The known kind of that name, or a generic sensor: its id is the name in lower case (spaces and
    /// other characters that can't be a topic level become `_`), its display name as given.
    public static func named(_ name: String) -> SensorKind {
        if let known = SensorKind(name: name) { return known }
        let id = String(name.lowercased().map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" })
        return SensorKind(id: id.isEmpty ? "_" : id, displayName: name)
    }

    /// A generic sensor with an id of its own (a bound sensor's `id`).
    public static func generic(id: String, displayName: String) -> SensorKind {
        SensorKind(id: id, displayName: displayName)
    }

    /// Whether this is one of the five sensors the bridge knows.
    public var isKnown: Bool { SensorKind.known.contains(self) }

    /// The unit of a numeric sensor, `nil` otherwise.
    public var unit: String? {
        switch self {
        case .temperature: "°C"
        case .humidity: "%"
        default: nil
        }
    }

    public var isNumeric: Bool { unit != nil }

    /// The seed words for on and off (`"On"`/`"Off"`, `"Detected"`/`"Not-Detected"`, `"Gas"`/`"Okey"`),
    /// `nil` for numeric and generic sensors.
    public var seedWords: (on: String, off: String)? {
        switch self {
        case .lights: ("On", "Off")
        case .movement: ("Detected", "Not-Detected")
        case .gas: ("Gas", "Okey")
        default: nil
        }
    }

    public var description: String { id }
}
