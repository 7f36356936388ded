import Foundation

/// One sensor's current value.
public enum SensorValue: Sendable, Equatable {
    case number(Double)
    case binary(Bool)
    /// A generic sensor's value, passed through as the upstream sent it.
    case text(String)

    /// The MQTT payload: `25.7`, `ON`, `OFF`.
    public var mqttPayload: String {
        switch self {
        case .number(let value): SensorValue.threeSignificantDigits(value)
        case .binary(let on): on ? "ON" : "OFF"
        case .text(let text): text
        }
    }

    /// The value in the seed vocabulary of `kind`: `"25.7"`, `"On"`, `"Not-Detected"`, `"Okey"`.
    public func seedText(for kind: SensorKind) -> String {
        switch self {
        case .number(let value):
            return SensorValue.threeSignificantDigits(value)
        case .binary(let on):
            guard let words = kind.seedWords else { return on ? "ON" : "OFF" }
            return on ? words.on : words.off
        case .text(let text):
            return text
        }
    }

    /// The seed route's icon: the sensor id for numeric and generic sensors, the current word for
    /// the on/off ones.
    public func seedIcon(for kind: SensorKind) -> String {
        kind.seedWords == nil ? kind.id : seedText(for: kind)
    }

    /// Reads a value in the seed vocabulary (`"25.7"`, `"On"`, `"Not-Detected"`, `"Okey"`) or the MQTT
    /// one (`ON`/`OFF`); `nil` when a known sensor's value is not in its vocabulary. Generic sensors
    /// take any text.
    public static func parse(_ text: String, for kind: SensorKind) -> SensorValue? {
        if kind.isNumeric {
            // Foundation's trimming only when the plain parse fails: this runs for every mirrored reading.
            guard let number = Double(text) ?? Double(text.trimmingCharacters(in: .whitespaces)), number.isFinite
            else { return nil }
            return .number(number)
        }
        guard let words = kind.seedWords else { return .text(text) }
        switch text {
        case words.on, "ON": return .binary(true)
        case words.off, "OFF": return .binary(false)
        default: return nil
        }
    }

    /// Formats like the original backend (`25.7`, `55.2`): three significant digits, never in
    /// exponent notation, no trailing `.0` dropped for values that need it.
    public static func threeSignificantDigits(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        let magnitude = value == 0 ? 0 : Int(floor(log10(abs(value))))
        let decimals = max(0, 2 - magnitude)
        return FixedDecimals.text(value, decimals: decimals)
    }
}
