import Foundation

extension ConfigNode {
    /// A parsed JSON value as the config decoders read it, so an API body is checked by the same
    /// code, with the same messages, as the config file (README, "Managing the home"): strings are
    /// quoted scalars, numbers and booleans plain ones, `null` a null. JSON objects lose their key
    /// order in Foundation, so their members are sorted: problems come in the same order each time.
    public static func fromJSON(_ value: Any) -> ConfigNode {
        switch value {
        case let text as String:
            return .scalar(text, isQuoted: true, line: 0)
        case let number as NSNumber:
            // JSON's true and false come as NSNumber whose type is "c" (char); numbers never do.
            if String(cString: number.objCType) == "c" {
                return .scalar(number.boolValue ? "true" : "false", isQuoted: false, line: 0)
            }
            return .scalar(number.stringValue, isQuoted: false, line: 0)
        case let items as [Any]:
            return .sequence(items.map(fromJSON), line: 0)
        case let members as [String: Any]:
            return .mapping(members.sorted { $0.key < $1.key }.map { (key: $0.key, value: fromJSON($0.value)) }, line: 0)
        default:
            return .null(line: 0)
        }
    }

    /// The node as JSON again (scalars as strings unless they are plain numbers or booleans): how
    /// a room's sensor list made through the API is kept in the database.
    public var json: JSONValue {
        switch self {
        case .scalar(let text, let quoted, _):
            if !quoted, text == "true" || text == "false" { return .bool(text == "true") }
            if !quoted, let whole = Int(text) { return .integer(whole) }
            if !quoted, let number = Double(text), number.isFinite { return .number(number) }
            return .string(text)
        case .mapping(let members, _):
            return .object(members.map { ($0.key, $0.value.json) })
        case .sequence(let items, _):
            return .array(items.map(\.json))
        case .null:
            return .null
        }
    }
}
