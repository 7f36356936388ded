import Foundation

/// The value of one config key, from the file or its environment variable, read as the type the key
/// wants. Every problem is recorded in `issues` naming the key (and the variable it came from), and the
/// reader then returns the default, so one pass finds every bad key.
public struct ConfigValue {
    public let path: String
    /// `nil` when the key is not set.
    public let node: ConfigNode?
    /// The `SMARTHOME_*` variable the value came from, `nil` when it came from the file.
    public let environmentName: String?
    public private(set) var issues: [ConfigIssue] = []

    public init(path: String, node: ConfigNode?, environmentName: String? = nil) {
        self.path = path
        self.node = node
        self.environmentName = environmentName
    }

    public var line: Int { node?.line ?? 0 }

    /// Records a problem with this key's value, at its line unless another is given.
    public mutating func fail(_ message: String, line: Int? = nil) {
        let shown = environmentName.map { "\(path) (from \($0))" } ?? path
        issues.append(ConfigIssue(path: shown, message: message, line: line ?? self.line))
    }

    /// The text of the value, `nil` when absent or null.
    public mutating func string() -> String? {
        switch node {
        case nil, .null?: return nil
        case .scalar(let text, _, _)?: return text
        case .mapping?, .sequence?:
            fail("must be a single value, not a list or mapping")
            return nil
        }
    }

    public mutating func nonEmptyString() -> String? {
        guard let text = string() else { return nil }
        if text.isEmpty {
            fail("must not be empty")
            return nil
        }
        return text
    }

    public mutating func int(in range: ClosedRange<Int>, default fallback: Int) -> Int {
        guard let text = string() else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            fail("must be a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(text)\"")
            return fallback
        }
        return value
    }

    public mutating func bool(default fallback: Bool) -> Bool {
        guard let text = string() else { return fallback }
        switch text.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default:
            fail("must be true or false, got \"\(text)\"")
            return fallback
        }
    }

    /// Seconds, written as a number (`30`, `0.5`) or with a unit (`500ms`, `30s`, `5m`, `2h`, `30d`):
    /// README "Configuration".
    public mutating func duration(in range: ClosedRange<Double>, default fallback: Double) -> Double {
        guard let text = string() else { return fallback }
        guard let seconds = ConfigValue.parseDuration(text), range.contains(seconds) else {
            fail("must be a duration from \(ConfigValue.seconds(range.lowerBound)) to "
                + "\(ConfigValue.seconds(range.upperBound)) seconds (a number of seconds or e.g. 30s, 5m, 2h, 30d), "
                + "got \"\(text)\"")
            return fallback
        }
        return seconds
    }

    /// A duration that must come out as whole seconds, for settings a C library takes as an integer
    /// (MQTT's keepalive): `30`, `30s` and `2m` are accepted, `1.5` or `1500ms` is refused rather than rounded.
    public mutating func wholeSeconds(in range: ClosedRange<Int>, default fallback: Int) -> Int {
        guard let text = string() else { return fallback }
        guard let seconds = ConfigValue.parseDuration(text), seconds.rounded() == seconds,
              seconds <= Double(Int.max / 2), range.contains(Int(seconds))
        else {
            fail("must be a whole number of seconds from \(range.lowerBound) to \(range.upperBound) "
                + "(e.g. 30, 30s, 2m), got \"\(text)\"")
            return fallback
        }
        return Int(seconds)
    }

    public mutating func oneOf<T: RawRepresentable & CaseIterable>(default fallback: T) -> T
    where T.RawValue == String {
        guard let text = string() else { return fallback }
        guard let value = T(rawValue: text.lowercased()) else {
            fail("must be one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(text)\"")
            return fallback
        }
        return value
    }

    /// Seconds from `30`, `0.5` or a number with one of the units `ms`, `s`, `m`, `h`, `d`; `nil` otherwise.
    public static func parseDuration(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            guard let number = Double(trimmed.dropLast(suffix.count)), number.isFinite, number >= 0 else { return nil }
            return number * factor
        }
        guard let number = Double(trimmed), number.isFinite, number >= 0 else { return nil }
        return number
    }

    /// `5` rather than `5.0` in messages.
    private static func seconds(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
