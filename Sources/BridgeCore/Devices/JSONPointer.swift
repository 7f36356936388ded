/// An RFC 6901 JSON pointer (`/hum/value`, `/list/0`, `~1` for `/`, `~0` for `~`), evaluated on
/// JSON as Foundation's `JSONSerialization` reads it. The empty pointer is the whole document.
public struct JSONPointer: Sendable, Equatable, CustomStringConvertible {
    public let tokens: [String]

    /// Parses a pointer; nil when it is not one (it must be empty or start with `/`, and `~` may
    /// only be followed by `0` or `1`).
    public init?(_ text: String) {
        // Over Unicode scalars, as RFC 6901 reads it: Swift's Characters would merge a `/` or `~`
        // with a combining mark after it into one Character that is neither.
        let scalars = text.unicodeScalars
        guard let first = scalars.first else {
            tokens = []
            return
        }
        guard first == "/" else { return nil }
        var tokens: [String] = []
        for raw in scalars.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            var token = String.UnicodeScalarView()
            var escaped = false
            for scalar in raw {
                if escaped {
                    switch scalar {
                    case "0": token.append("~")
                    case "1": token.append("/")
                    default: return nil
                    }
                    escaped = false
                } else if scalar == "~" {
                    escaped = true
                } else {
                    token.append(scalar)
                }
            }
            if escaped { return nil }
            tokens.append(String(token))
        }
        self.tokens = tokens
    }

    /// A pointer to one member of the top-level object.
    public init(member: String) {
        tokens = [member]
    }

    public var description: String {
        var text = String.UnicodeScalarView()
        for token in tokens {
            text.append("/")
            for scalar in token.unicodeScalars {
                switch scalar {
                case "~": text.append(contentsOf: "~0".unicodeScalars)
                case "/": text.append(contentsOf: "~1".unicodeScalars)
                default: text.append(scalar)
                }
            }
        }
        return String(text)
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
