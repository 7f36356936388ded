/// One key of the config file (`mqtt.keepalive`) and how its value is decoded into a
/// `BridgeConfiguration`.
///
/// `ConfigKey.all` is the only list of keys: the loader accepts exactly those paths and their
/// environment variables, so a key cannot be accepted without being decoded.
public struct ConfigKey: Sendable {
    public typealias Field<Value> = WritableKeyPath<BridgeConfiguration, Value> & Sendable

    /// The dotted path in the file: `mqtt.tls.ca`.
    public let path: String
    let decode: @Sendable (inout ConfigValue, inout BridgeConfiguration) -> Void

    /// Decodes with a function of its own, for keys with rules beyond their type.
    public init(_ path: String, decode: @escaping @Sendable (inout ConfigValue, inout BridgeConfiguration) -> Void) {
        self.path = path
        self.decode = decode
    }

    /// The variable that overrides the key: `SMARTHOME_` and the path in upper case with dots as
    /// underscores (README "Configuration").
    public var environmentName: String { ConfigKey.environmentName(of: path) }

    public static func environmentName(of path: String) -> String {
        "SMARTHOME_" + path.uppercased().replacing(".", with: "_")
    }

    // MARK: Keys by type; each keeps the field's default when the key is not set

    /// Optional text: unset stays `nil`, an empty value is refused.
    static func text(_ path: String, _ field: Field<String?>) -> ConfigKey {
        ConfigKey(path) { value, config in config[keyPath: field] = value.nonEmptyString() }
    }

    /// Text with a default: an empty value is refused.
    static func text(_ path: String, _ field: Field<String>) -> ConfigKey {
        ConfigKey(path) { value, config in
            if let text = value.nonEmptyString() { config[keyPath: field] = text }
        }
    }

    static func int(_ path: String, _ field: Field<Int>, in range: ClosedRange<Int>) -> ConfigKey {
        ConfigKey(path) { value, config in config[keyPath: field] = value.int(in: range, default: config[keyPath: field]) }
    }

    static func bool(_ path: String, _ field: Field<Bool>) -> ConfigKey {
        ConfigKey(path) { value, config in config[keyPath: field] = value.bool(default: config[keyPath: field]) }
    }

    static func duration(_ path: String, _ field: Field<Double>, in range: ClosedRange<Double>) -> ConfigKey {
        ConfigKey(path) { value, config in
            config[keyPath: field] = value.duration(in: range, default: config[keyPath: field])
        }
    }

    /// Optional degrees of latitude or longitude: a decimal number in `range`.
    static func degrees(_ path: String, _ field: Field<Double?>, in range: ClosedRange<Double>) -> ConfigKey {
        ConfigKey(path) { value, config in
            guard let text = value.nonEmptyString() else { return }
            guard let number = Double(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
                value.fail("must be a number of degrees from \(Int(range.lowerBound)) to \(Int(range.upperBound)), got \"\(text)\"")
                return
            }
            config[keyPath: field] = number
        }
    }

    /// A decimal number in `range` (`0.5`, `10`).
    static func number(_ path: String, _ field: Field<Double>, in range: ClosedRange<Double>) -> ConfigKey {
        ConfigKey(path) { value, config in
            guard let text = value.nonEmptyString() else { return }
            guard let number = Double(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
                let bounds = [range.lowerBound, range.upperBound].map { $0 == $0.rounded() ? String(Int($0)) : String($0) }
                value.fail("must be a number from \(bounds[0]) to \(bounds[1]), got \"\(text)\"")
                return
            }
            config[keyPath: field] = number
        }
    }

    static func wholeSeconds(_ path: String, _ field: Field<Int>, in range: ClosedRange<Int>) -> ConfigKey {
        ConfigKey(path) { value, config in
            config[keyPath: field] = value.wholeSeconds(in: range, default: config[keyPath: field])
        }
    }

    static func choice<T: RawRepresentable & CaseIterable & Sendable>(_ path: String, _ field: Field<T>) -> ConfigKey
    where T.RawValue == String {
        ConfigKey(path) { value, config in config[keyPath: field] = value.oneOf(default: config[keyPath: field]) }
    }
}
