/// A parsed configuration document, independent of the file format that produced it.
///
/// The YAML adapter turns a file into this tree; `BridgeConfiguration` validates it. Keeping the
/// tree format-neutral lets the core check configs without importing a C parser.
public indirect enum ConfigNode: Sendable, Equatable {
    /// A scalar as written in the file. `isQuoted` tells `"5"` (a string) from `5`.
    case scalar(String, isQuoted: Bool, line: Int)
    /// A mapping, keys in file order (duplicates are kept so validation can report them).
    case mapping([(key: String, value: ConfigNode)], line: Int)
    case sequence([ConfigNode], line: Int)
    /// An empty value (`key:` with nothing after it, or `~`/`null`).
    case null(line: Int)

    /// The 1-based line where the node starts in its file (0 when unknown, e.g. from the environment).
    public var line: Int {
        switch self {
        case .scalar(_, _, let line), .mapping(_, let line), .sequence(_, let line), .null(let line):
            return line
        }
    }

    public static func == (lhs: ConfigNode, rhs: ConfigNode) -> Bool {
        switch (lhs, rhs) {
        case let (.scalar(a, qa, _), .scalar(b, qb, _)):
            return a == b && qa == qb
        case let (.mapping(a, _), .mapping(b, _)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case let (.sequence(a, _), .sequence(b, _)):
            return a == b
        case (.null, .null):
            return true
        default:
            return false
        }
    }
}

/// A problem found while reading or validating a config, tied to the key path it concerns.
public struct ConfigIssue: Error, Sendable, Equatable, CustomStringConvertible {
    /// Dotted key path, with sequence indexes in brackets: `users[0].rooms[2].name`.
    public var path: String
    public var message: String
    /// 1-based line in the file, or 0 when the value came from the environment or a default.
    public var line: Int

    public init(path: String, message: String, line: Int = 0) {
        self.path = path
        self.message = message
        self.line = line
    }

    public var description: String {
        let location = line > 0 ? " (line \(line))" : ""
        return "\(path.isEmpty ? "<document>" : path): \(message)\(location)"
    }

    /// `{"path":…,"message":…}` (and `"line"` when known): how API answers and MQTT responses list problems.
    public var json: JSONValue {
        .object([("path", .string(path)), ("message", .string(message))] + (line > 0 ? [("line", .integer(line))] : []))
    }
}

/// Every problem found in one config, in the order found.
public struct ConfigIssues: Error, Sendable, Equatable, CustomStringConvertible {
    public var issues: [ConfigIssue]

    public init(issues: [ConfigIssue]) {
        self.issues = issues
    }

    public var description: String { issues.map(\.description).joined(separator: "\n") }
}
