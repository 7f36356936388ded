import Foundation

/// One sensor's current value.
public enum SensorValue: Sendable, Equatable {
    case number(Double)
    case binary(Bool)

    /// The MQTT payload: `25.7`, `ON`, `OFF`.
    public var mqttPayload: String {
        switch self {
        case .number(let value): SensorValue.threeSignificantDigits(value)
        case .binary(let on): on ? "ON" : "OFF"
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
        }
    }

    /// The seed route's icon: the sensor id for numeric sensors, the current word for the others.
    public func seedIcon(for kind: SensorKind) -> String {
        kind.isNumeric ? kind.id : seedText(for: kind)
    }

    /// Formats like the original backend (`25.7`, `55.2`): three significant digits, never in
    /// exponent notation, no trailing `.0` dropped for values that need it.
    public static func threeSignificantDigits(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        let magnitude = value == 0 ? 0 : Int(floor(log10(abs(value))))
        let decimals = max(0, 2 - magnitude)
        return String(format: "%.\(decimals)f", value)
    }
}
