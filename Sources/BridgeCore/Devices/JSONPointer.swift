/// An RFC 6901 JSON pointer (`/hum/value`, `/list/0`, `~1` for `/`, `~0` for `~`), evaluated on
/// JSON as Foundation's `JSONSerialization` reads it. The empty pointer is the whole document.
public struct JSONPointer: Sendable, Equatable, CustomStringConvertible {
    public let tokens: [String]

    /// Parses a pointer; nil when it is not one (it must be empty or start with `/`, and `~` may
    /// only be followed by `0` or `1`).
    public init?(_ text: String) {
        guard !text.isEmpty else {
            tokens = []
            return
        }
        guard text.hasPrefix("/") else { return nil }
        var tokens: [String] = []
        for raw in text.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            var token = ""
            var escaped = false
            for character in raw {
                if escaped {
                    switch character {
                    case "0": token.append("~")
                    case "1": token.append("/")
                    default: return nil
                    }
                    escaped = false
                } else if character == "~" {
                    escaped = true
                } else {
                    token.append(character)
                }
            }
            if escaped { return nil }
            tokens.append(token)
        }
        self.tokens = tokens
    }

    /// A pointer to one member of the top-level object.
    public init(member: String) {
        tokens = [member]
    }

    public var description: String {
        tokens.map { "/" + $0.replacing("~", with: "~0").replacing("/", with: "~1") }.joined()
    }

    /// The value the pointer names in `document`, or nil when there is none. An array index must
    /// be a decimal number without leading zeros (`-`, past the end, names nothing here).
    public func resolve(in document: Any) -> Any? {
        var current = document
        for token in tokens {
            if let object = current as? [String: Any] {
                guard let next = object[token] else { return nil }
                current = next
            } else if let array = current as? [Any] {
                guard let index = Int(token), index >= 0, String(index) == token, index < array.count else { return nil }
                current = array[index]
            } else {
                return nil
            }
        }
        return current
    }
}
