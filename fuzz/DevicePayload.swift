import BridgeCore
import Foundation

/// Fuzzes what a bound sensor reads from a device (README, "Fuzzing"): `DevicePayload.decode` with every extractor (whole payload, JSON pointer,
/// Tasmota, rtl_433) and every sensor kind, and `JSONPointer(_:)` on the same bytes as pointer text.
///
/// The first three bytes choose: byte 0 the extractor and its options (block, field, channel, pointer),
/// byte 1 the sensor kind, byte 2 the binding's options (scale, offset, precision, unit) and whether the
/// payload is also padded past `DevicePayload.maxBytes` or wrapped deeper than `DevicePayload.maxDepth`.
/// The rest is the payload.
///
/// Invariants: decoding is deterministic; a numeric sensor's value is a finite number, a binary
/// sensor's is on/off, a generic sensor's text; only an rtl_433 extractor says "not for this sensor";
/// a payload over `maxBytes` (the input padded with white space) never gives a value, only `tooLarge`;
/// JSON nested deeper than `maxDepth` (counted outside strings) is `tooDeep` for every JSON extractor and
/// `tooDeep` is given for nothing else; a problem's description is short and free of control characters.
/// A pointer that parses has the tokens of an RFC 6901 reference parse (over Unicode scalars), prints
/// back (`description`) to exactly its text and parses again to the same tokens.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    checkPointer(input)
    guard input.count >= 3 else { return 0 }
    let payload = Array(input[3...])
    let extractor = DeviceFuzzChoice.extractor(input[0], payload: payload)
    let sensor = DeviceFuzzChoice.sensors[Int(input[1]) % DeviceFuzzChoice.sensors.count]
    let bound = DeviceFuzzChoice.bound(input[2])
    check(payload, extractor: extractor, sensor: sensor, bound: bound)
    if input[2] & 0x80 != 0 {
        // The same payload padded past the limit: looked at no further than its size.
        var large = payload
        large.append(contentsOf: repeatElement(UInt8(ascii: " "), count: DevicePayload.maxBytes + 1 - min(payload.count, DevicePayload.maxBytes)))
        let outcome = DevicePayload.decode(large, extractor: extractor, sensor: sensor, bound: bound)
        require(outcome == .problem(.tooLarge(bytes: large.count)),
                "a payload of \(large.count) bytes gave \(outcome): \(excerpt(payload))")
    }
    if input[2] & 0x40 != 0 {
        // Wrapped in arrays past the depth limit: refused before parsing, whatever is inside.
        let levels = DevicePayload.maxDepth + 1 + Int(input[1] >> 4)
        let deep = Array(repeating: UInt8(ascii: "["), count: levels) + Array("1".utf8)
            + Array(repeating: UInt8(ascii: "]"), count: levels)
        for kind in [ValueExtractor.pointer(JSONPointer("")!), .pointer(JSONPointer("/0")!),
                     .tasmota(block: nil, field: "Temperature"),
                     .rtl433(model: "m", id: "1", channel: nil, field: nil)] {
            let outcome = DevicePayload.decode(deep, extractor: kind, sensor: sensor, bound: bound)
            require(outcome == .problem(.tooDeep), "\(levels) nested arrays gave \(outcome) with \(kind)")
        }
        check(deep, extractor: extractor, sensor: sensor, bound: bound)
    }
    return 0
}

private func check(_ payload: [UInt8], extractor: ValueExtractor, sensor: SensorKind, bound: BoundSensor) {
    let outcome = DevicePayload.decode(payload, extractor: extractor, sensor: sensor, bound: bound)
    require(DevicePayload.decode(payload, extractor: extractor, sensor: sensor, bound: bound) == outcome,
            "decode is not deterministic for \(excerpt(payload))")
    let isJSON: Bool
    // Whether the extractor may say a message is not about this sensor (another rtl_433 device, a
    // Tasmota RESULT about something else).
    let mayBeOthers: Bool
    switch extractor {
    case .whole: (isJSON, mayBeOthers) = (false, false)
    case .pointer, .tasmota: (isJSON, mayBeOthers) = (true, false)
    case .pointerIfPresent, .rtl433: (isJSON, mayBeOthers) = (true, true)
    }
    let valid = payload.count <= DevicePayload.maxBytes && String(validating: payload, as: UTF8.self) != nil
    let tooDeep = isJSON && valid && nesting(payload) > DevicePayload.maxDepth
    if tooDeep {
        require(outcome == .problem(.tooDeep), "\(nesting(payload)) levels deep gave \(outcome) with \(extractor)")
    }
    switch outcome {
    case .value(let value):
        require(payload.count <= DevicePayload.maxBytes, "a value from \(payload.count) bytes")
        switch value {
        case .number(let number):
            require(sensor.isNumeric, "\(sensor) (not numeric) got the number \(number) from \(excerpt(payload))")
            require(number.isFinite, "\(sensor) got \(number) from \(excerpt(payload)) (\(describe(bound)))")
        case .binary:
            require(sensor.seedWords != nil, "\(sensor) (not binary) got \(value) from \(excerpt(payload))")
        case .text:
            require(!sensor.isNumeric && sensor.seedWords == nil,
                    "\(sensor) (not generic) got \(value) from \(excerpt(payload))")
        }
    case .notForThisSensor:
        require(mayBeOthers, "\(extractor) said not for this sensor: \(excerpt(payload))")
    case .problem(let problem):
        if case .tooDeep = problem {
            require(tooDeep, "tooDeep for \(nesting(payload)) levels with \(extractor): \(excerpt(payload))")
        }
        if case .tooLarge = problem { require(payload.count > DevicePayload.maxBytes, "tooLarge for \(payload.count) bytes") }
        let description = problem.description
        require(!description.isEmpty && !problem.code.isEmpty, "empty problem for \(excerpt(payload))")
        require(description.unicodeScalars.count <= 200,
                "problem for \(excerpt(payload)) echoes \(description.unicodeScalars.count) scalars")
        require(hasNoControlCharacters(description),
                "problem for \(excerpt(payload)) carries a control character: \(description.debugDescription)")
    }
}

/// The whole input as a pointer's text (valid UTF-8 only: config text is).
private func checkPointer(_ input: [UInt8]) {
    guard let text = String(validating: input, as: UTF8.self) else { return }
    let reference = referenceTokens(text)
    guard let pointer = JSONPointer(text) else {
        require(reference == nil, "\(text.debugDescription) is an RFC 6901 pointer (\(reference!)) but was refused")
        return
    }
    require(reference.map { $0.map { Array($0.unicodeScalars) } } == pointer.tokens.map { Array($0.unicodeScalars) },
            "\(text.debugDescription) parsed to \(pointer.tokens), RFC 6901 says \(String(describing: reference))")
    let printed = pointer.description
    require(Array(printed.unicodeScalars) == Array(text.unicodeScalars),
            "\(text.debugDescription) prints back as \(printed.debugDescription)")
    guard let again = JSONPointer(printed) else { fatalError("fuzz invariant violated: \(printed.debugDescription) does not parse") }
    require(again.tokens.map { Array($0.unicodeScalars) } == pointer.tokens.map { Array($0.unicodeScalars) },
            "\(text.debugDescription) → \(printed.debugDescription) → \(again.tokens), not \(pointer.tokens)")
}

/// RFC 6901, section 3, over Unicode scalars: "" or "/"-separated tokens, `~0` is `~`, `~1` is `/`,
/// and `~` followed by anything else (or nothing) is no pointer.
private func referenceTokens(_ text: String) -> [String]? {
    let scalars = Array(text.unicodeScalars)
    guard !scalars.isEmpty else { return [] }
    guard scalars[0] == "/" else { return nil }
    var tokens: [String] = []
    var token = String.UnicodeScalarView()
    var index = 1
    while index <= scalars.count {
        if index == scalars.count || scalars[index] == "/" {
            tokens.append(String(token))
            token = String.UnicodeScalarView()
        } else if scalars[index] == "~" {
            guard index + 1 < scalars.count else { return nil }
            switch scalars[index + 1] {
            case "0": token.append("~")
            case "1": token.append("/")
            default: return nil
            }
            index += 1
        } else {
            token.append(scalars[index])
        }
        index += 1
    }
    return tokens
}

/// The deepest nesting of `[` and `{` outside JSON strings, written apart from `DevicePayload`'s own.
private func nesting(_ payload: [UInt8]) -> Int {
    var depth = 0
    var deepest = 0
    var index = 0
    while index < payload.count {
        let byte = payload[index]
        if byte == UInt8(ascii: "\"") {
            index += 1
            while index < payload.count, payload[index] != UInt8(ascii: "\"") {
                index += payload[index] == UInt8(ascii: "\\") ? 2 : 1
            }
        } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") {
            depth += 1
            deepest = max(deepest, depth)
        } else if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
            depth -= 1
        }
        index += 1
    }
    return deepest
}

private func describe(_ bound: BoundSensor) -> String {
    "scale \(bound.scale), offset \(bound.offset), precision \(String(describing: bound.precision)), unit \(String(describing: bound.unit))"
}

/// How the first bytes of an input choose what decodes it.
enum DeviceFuzzChoice {
    static let sensors: [SensorKind] = SensorKind.known + [.named("Pressure"), .named("Door Contact")]
    static let pointers = ["", "/temp", "/hum/value", "/list/0", "/a~1b", "/m~0n", "/", "//", "/0/1/2", "/temperature"]
    static let fields = ["Temperature", "Humidity", "state", "temperature_C", "humidity", "Power"]
    static let scales = [1.0, 0.1, 10, -1, 1e308, .greatestFiniteMagnitude, .leastNonzeroMagnitude, 0]
    static let offsets = [0.0, -32, 0.5, 1e308]
    static let precisions: [Int?] = [nil, 0, 1, 6]
    static let units: [String?] = [nil, "°F", "F", "°C"]

    /// Bits 0-1: the extractor; the others its options.
    static func extractor(_ byte: UInt8, payload: [UInt8]) -> ValueExtractor {
        let option = Int(byte >> 2)
        switch byte & 3 {
        case 0: return .whole
        case 1:
            let pointer = JSONPointer(pointers[(option / 2) % pointers.count]) ?? JSONPointer(member: "temp")
            return option & 1 == 0 ? .pointer(pointer) : .pointerIfPresent(pointer)
        case 2:
            let blocks: [String?] = [nil, "SI7021", "AM2301", "DS18B20"]
            return .tasmota(block: blocks[option % blocks.count], field: fields[(option / 4) % fields.count])
        default:
            let fieldChoice = option % (fields.count + 1)
            return .rtl433(model: "Bresser-6in1", id: "411042499", channel: option & 8 != 0 ? "1" : nil,
                           field: fieldChoice == fields.count ? nil : fields[fieldChoice])
        }
    }

    static func bound(_ byte: UInt8) -> BoundSensor {
        var binding = MQTTBinding()
        binding.topic = "bench/dev/1"
        binding.on = ["open"]
        binding.off = ["shut"]
        var bound = BoundSensor(binding: .mqtt(binding))
        let option = Int(byte & 0x3F)
        bound.scale = option & 1 == 0 ? 1 : scales[(option >> 1) % scales.count]
        bound.offset = offsets[(option >> 2) % offsets.count]
        bound.precision = precisions[(option >> 3) % precisions.count]
        bound.unit = units[(option >> 4) % units.count]
        return bound
    }
}
