import Foundation

/// How a value is taken out of a device's message.
public enum ValueExtractor: Sendable, Equatable {
    /// The whole payload is the value (`22.5`, `ON`).
    case whole
    /// A member of a JSON payload.
    case pointer(JSONPointer)
    /// A member that only some messages on the topic carry (Tasmota's `RESULT` answers every
    /// command, not only `POWER`): a message without it is not about this sensor.
    case pointerIfPresent(JSONPointer)
    /// Tasmota's `SENSOR` telemetry: `field` of the named block, or of the first block that has it;
    /// `TempUnit` says whether temperatures are in F.
    case tasmota(block: String?, field: String)
    /// An rtl_433 event, when its `model`, `id` (and `channel`) match: `field`, or the sensor's
    /// usual one (`temperature_C`, or `temperature_F` converted; `humidity`). A device's messages
    /// differ by type (a Bresser 6-in-1 sends temperature and humidity in some, the rain counter
    /// instead in others), so an event without the member is not about this sensor either.
    case rtl433(model: String, id: String, channel: String?, field: String?)
}

/// Why a device's message gave no value (counted and logged once per sensor per change of problem).
public enum DevicePayloadProblem: Error, Sendable, Equatable, CustomStringConvertible {
    case tooLarge(bytes: Int)
    case notText
    case notJSON
    case tooDeep
    case missing(String)
    case notANumber(String)
    case notOnOff(String)

    /// A short code for logs and metrics.
    public var code: String {
        switch self {
        case .tooLarge: "too_large"
        case .notText: "not_text"
        case .notJSON: "not_json"
        case .tooDeep: "too_deep"
        case .missing: "missing"
        case .notANumber: "not_a_number"
        case .notOnOff: "not_on_off"
        }
    }

    public var description: String {
        switch self {
        case .tooLarge(let bytes): "payload of \(bytes) bytes is over \(DevicePayload.maxBytes)"
        case .notText: "payload is not UTF-8 text"
        case .notJSON: "payload is not JSON"
        case .tooDeep: "JSON nested deeper than \(DevicePayload.maxDepth) levels"
        case .missing(let what): "payload has no \(what)"
        case .notANumber(let text): "\(DevicePayload.excerpt(text)) is not a number"
        case .notOnOff(let text): "\(DevicePayload.excerpt(text)) is neither on nor off"
        }
    }
}

/// Turns a device's message into a sensor value: extracts it, reads it as a number (converted to
/// the sensor's unit, scaled, offset, rounded) or as on/off, and says what was wrong otherwise.
/// Bounded: at most `maxBytes` are looked at and JSON deeper than `maxDepth` is refused before
/// it is parsed.
public enum DevicePayload {
    public static let maxBytes = 65_536
    public static let maxDepth = 32

    /// What one message said about one sensor.
    public enum Outcome: Sendable, Equatable {
        case value(SensorValue)
        /// Not about this sensor (an rtl_433 event of another device).
        case notForThisSensor
        case problem(DevicePayloadProblem)
    }

    public static func decode(_ payload: [UInt8], extractor: ValueExtractor, sensor: SensorKind,
                              bound: BoundSensor) -> Outcome {
        guard payload.count <= maxBytes else { return .problem(.tooLarge(bytes: payload.count)) }
        guard let text = String(validating: payload, as: UTF8.self) else { return .problem(.notText) }
        var raw: Any
        var unit = bound.unit
        switch extractor {
        case .whole:
            raw = text.trimmingCharacters(in: .whitespacesAndNewlines)
        case .pointer(let pointer), .pointerIfPresent(let pointer):
            guard let document = parse(payload) else { return .problem(depth(payload) > maxDepth ? .tooDeep : .notJSON) }
            guard let found = pointer.resolve(in: document) else {
                if case .pointerIfPresent = extractor { return .notForThisSensor }
                return .problem(.missing(pointer.description))
            }
            raw = found
        case .tasmota(let block, let field):
            guard let object = parse(payload) as? [String: Any] else {
                return .problem(depth(payload) > maxDepth ? .tooDeep : .notJSON)
            }
            let blocks = block.map { [$0] } ?? object.keys.sorted()
            guard let found = blocks.lazy.compactMap({ (object[$0] as? [String: Any])?[field] }).first else {
                return .problem(.missing(block.map { "\($0).\(field)" } ?? field))
            }
            raw = found
            if sensor == .temperature, (object["TempUnit"] as? String)?.uppercased() == "F" { unit = "°F" }
        case .rtl433(let model, let id, let channel, let field):
            guard let object = parse(payload) as? [String: Any] else {
                return .problem(depth(payload) > maxDepth ? .tooDeep : .notJSON)
            }
            guard scalarText(object["model"]) == model, scalarText(object["id"]) == id,
                  channel == nil || scalarText(object["channel"]) == channel
            else { return .notForThisSensor }
            if let field {
                guard let found = object[field] else { return .notForThisSensor }
                raw = found
            } else if sensor == .temperature, let celsius = object["temperature_C"] {
                raw = celsius
                unit = nil
            } else if sensor == .temperature, let fahrenheit = object["temperature_F"] {
                raw = fahrenheit
                unit = "°F"
            } else if let found = object[sensor.id] {
                raw = found
            } else {
                return .notForThisSensor
            }
        }
        return value(raw, sensor: sensor, bound: bound, unit: unit)
    }

    /// The JSON document, or nil when the payload is not JSON (or nested too deep to be read).
    public static func json(_ payload: [UInt8]) -> Any? {
        parse(payload)
    }

    private static func parse(_ payload: [UInt8]) -> Any? {
        guard payload.count <= maxBytes, depth(payload) <= maxDepth else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(payload), options: [.fragmentsAllowed])
    }

    /// The deepest nesting of `[` and `{` outside strings: checked before parsing, so a hostile
    /// payload costs one pass over its bytes.
    static func depth(_ payload: [UInt8]) -> Int {
        var depth = 0
        var deepest = 0
        var inString = false
        var escaped = false
        for byte in payload {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true }
                else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                deepest = max(deepest, depth)
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return deepest
    }

    static func scalarText(_ value: Any?) -> String? {
        switch value {
        case let text as String: text
        case let number as NSNumber: number.stringValue
        default: nil
        }
    }

    /// A raw JSON value (or text) as the sensor's value.
    static func value(_ raw: Any, sensor: SensorKind, bound: BoundSensor, unit: String?) -> Outcome {
        if sensor.isNumeric {
            let number: Double
            switch raw {
            case let value as NSNumber where !isBoolean(value):
                number = value.doubleValue
            case let text as String:
                guard let parsed = Double(text.trimmingCharacters(in: .whitespaces)) else {
                    return .problem(.notANumber(text))
                }
                number = parsed
            default:
                return .problem(.notANumber(describe(raw)))
            }
            var converted = number * bound.scale + bound.offset
            if sensor == .temperature, let unit, ["°f", "f", "fahrenheit"].contains(unit.lowercased()) {
                converted = (converted - 32) * 5 / 9
            }
            if let precision = bound.precision {
                let factor = pow(10, Double(precision))
                converted = (converted * factor).rounded() / factor
            }
            guard converted.isFinite else { return .problem(.notANumber(describe(raw))) }
            return .value(.number(converted))
        }
        guard sensor.seedWords != nil else { return .value(.text(describe(raw))) }
        let words = bound.onOffWords
        switch raw {
        case let value as NSNumber where isBoolean(value):
            return .value(.binary(value.boolValue))
        case let value as NSNumber:
            if value.doubleValue == 1 { return .value(.binary(true)) }
            if value.doubleValue == 0 { return .value(.binary(false)) }
            return .problem(.notOnOff(value.stringValue))
        case let text as String:
            let word = text.trimmingCharacters(in: .whitespacesAndNewlines)
            let lower = word.lowercased()
            if words.on.contains(word) || ["on", "true", "1", "open", "detected"].contains(lower) { return .value(.binary(true)) }
            if words.off.contains(word) || ["off", "false", "0", "closed", "clear"].contains(lower) {
                return .value(.binary(false))
            }
            if let seed = sensor.seedWords, word == seed.on { return .value(.binary(true)) }
            if let seed = sensor.seedWords, word == seed.off { return .value(.binary(false)) }
            return .problem(.notOnOff(word))
        default:
            return .problem(.notOnOff(describe(raw)))
        }
    }

    /// JSON's `true`/`false` as `JSONSerialization` reads them: NSNumbers of type char.
    private static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }

    private static func describe(_ raw: Any) -> String {
        switch raw {
        case let text as String: text
        case let number as NSNumber: number.stringValue
        case is [Any]: "an array"
        case is [String: Any]: "an object"
        default: "null"
        }
    }

    /// Up to 40 characters, quoted, for a log line.
    static func excerpt(_ text: String) -> String {
        "\"" + String(text.prefix(40).map { $0.isASCII && ($0.asciiValue ?? 0) < 0x20 ? "?" : $0 }) + "\""
    }
}
