import Foundation

/// A JSON value whose objects keep their keys in the order they were built.
///
/// The seed routes promise key order (`SensorNames`, `SensorIcon`, `SensorValues` first), and
/// Foundation's encoders don't promise any order, so every JSON the bridge sends is built here.
public indirect enum JSONValue: Sendable, Equatable {
    case string(String)
    case number(Double)
    case integer(Int)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case let (.string(a), .string(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.integer(a), .integer(b)): return a == b
        case let (.bool(a), .bool(b)): return a == b
        case (.null, .null): return true
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// Strings as a JSON array.
    public static func strings(_ values: [String]) -> JSONValue {
        .array(values.map(JSONValue.string))
    }

    /// Compact JSON text.
    public var serialized: String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// Compact JSON as UTF-8 bytes, written straight into one byte array (what HTTP answers and
    /// MQTT payloads need), which is cheaper than appending to a `String`.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .number(let d): out += (d.isFinite ? JSONValue.format(d) : "null").utf8
        case .integer(let i): out += String(i).utf8
        case .bool(let b): out += (b ? "true" : "false").utf8
        case .null: out += "null".utf8
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func format(_ d: Double) -> String {
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
        return "\(d)"
    }

    private static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (names, ids, values) need no escape: copied whole, not byte by byte.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out += s.utf8
        } else {
            for byte in s.utf8 { appendEscaped(byte, to: &out) }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// One UTF-8 byte of a string: bytes of multi-byte characters are all ≥ 0x80 and go as they are.
    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): out += #"\""#.utf8
        case UInt8(ascii: "\\"): out += #"\\"#.utf8
        case UInt8(ascii: "\n"): out += #"\n"#.utf8
        case UInt8(ascii: "\r"): out += #"\r"#.utf8
        case UInt8(ascii: "\t"): out += #"\t"#.utf8
        case ..<0x20:
            let hex = Array("0123456789abcdef".utf8)
            out += #"\u00"#.utf8
            out += [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
        default: out.append(byte)
        }
    }
}
