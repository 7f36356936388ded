import Foundation

/// Reads an upstream's answer to `GET /rooms/:userID/:room` (the seed shape: parallel arrays of
/// names and values) into readings.
public enum SeedRoomParser {
    /// Why an answer could not be used.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String

        public init(_ description: String) {
            self.description = description
        }
    }

    /// The readings in an answer. Names the bridge does not know become generic sensors whose
    /// values pass through as text; a known sensor's value outside its vocabulary is a problem.
    public static func parse(_ bytes: [UInt8]) -> Result<[(sensor: SensorKind, value: SensorValue)], Problem> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) else {
            return .failure(Problem("not JSON"))
        }
        guard let fields = object as? [String: Any] else { return .failure(Problem("not a JSON object")) }
        guard let names = fields["SensorNames"] as? [Any] else { return .failure(Problem("no SensorNames array")) }
        guard let values = fields["SensorValues"] as? [Any] else { return .failure(Problem("no SensorValues array")) }
        guard names.count == values.count else {
            return .failure(Problem("SensorNames has \(names.count) entries but SensorValues has \(values.count)"))
        }
        if let icons = fields["SensorIcon"] as? [Any], icons.count != names.count {
            return .failure(Problem("SensorIcon has \(icons.count) entries but SensorNames has \(names.count)"))
        }
        var readings: [(sensor: SensorKind, value: SensorValue)] = []
        for (index, (nameValue, textValue)) in zip(names, values).enumerated() {
            guard let name = nameValue as? String, !name.isEmpty else {
                return .failure(Problem("SensorNames[\(index)] is not a non-empty string"))
            }
            let text: String
            if let string = textValue as? String {
                text = string
            } else if let number = textValue as? NSNumber, !JSONBoolean.isBoolean(number) {
                text = number.stringValue
            } else {
                return .failure(Problem("SensorValues[\(index)] is not a string"))
            }
            let sensor = SensorKind.named(name)
            guard let value = SensorValue.parse(text, for: sensor) else {
                return .failure(Problem("\(name) has the value \(LightCommand.quoted(text)), not one it can take"))
            }
            if readings.contains(where: { $0.sensor == sensor }) {
                return .failure(Problem("\(name) is listed twice"))
            }
            readings.append((sensor, value))
        }
        return .success(readings)
    }
}
