import Foundation

/// The JSON bodies the API accepts, parsed from untrusted bytes with a message naming what is wrong.
public enum APIBody {
    /// A body that could not be used: answered with 400 and this message.
    public struct Problem: Error, Sendable, Equatable {
        public var message: String

        public init(_ message: String) {
            self.message = message
        }
    }

    public struct Login: Sendable, Equatable {
        public var username: String
        public var password: String
    }

    /// `{"username":"...","password":"..."}`.
    public static func login(_ bytes: [UInt8]) -> Result<Login, Problem> {
        object(bytes).flatMap { fields in
            string(fields, "username").flatMap { username in
                string(fields, "password").map { Login(username: username, password: $0) }
            }
        }
    }

    /// `{"state":"ON"|"OFF"|"TOGGLE"}` (any case).
    public static func lights(_ bytes: [UInt8]) -> Result<LightCommand, Problem> {
        object(bytes).flatMap { fields in
            string(fields, "state").flatMap { word in
                guard let command = LightCommand(word: word) else {
                    return .failure(Problem("field \"state\" must be ON, OFF or TOGGLE"))
                }
                return .success(command)
            }
        }
    }

    /// The largest body looked at; the HTTP server refuses larger ones before this.
    static let maxBytes = 64 * 1024

    static func object(_ bytes: [UInt8]) -> Result<[String: Any], Problem> {
        if bytes.isEmpty { return .failure(Problem("request body is empty; expected a JSON object")) }
        if bytes.count > maxBytes { return .failure(Problem("request body is too large")) }
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(bytes)) else {
            return .failure(Problem("request body is not valid JSON"))
        }
        guard let fields = parsed as? [String: Any] else {
            return .failure(Problem("request body must be a JSON object"))
        }
        return .success(fields)
    }

    /// Any JSON value (a stored one, read back), or nil when the bytes are not JSON.
    static func anyJSON(_ bytes: [UInt8]) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
    }

    /// The longest string field, in bytes: characters can be many bytes each (combining marks), so text is
    /// bounded by what it costs to store and send, not by what it looks like.
    static let maxStringBytes = 1024

    static func string(_ fields: [String: Any], _ name: String) -> Result<String, Problem> {
        guard let value = fields[name], !(value is NSNull) else {
            return .failure(Problem("field \"\(name)\" is required"))
        }
        guard let text = value as? String else { return .failure(Problem("field \"\(name)\" must be a string")) }
        guard !text.isEmpty else { return .failure(Problem("field \"\(name)\" must not be empty")) }
        guard text.utf8.count <= maxStringBytes else {
            return .failure(Problem("field \"\(name)\" is too long (at most \(maxStringBytes) bytes of UTF-8)"))
        }
        // SQLite and C strings end text at U+0000: "\u0000 hidden" would be stored as "" (README "The
        // authenticated API (v1)").
        guard !text.utf8.contains(0) else {
            return .failure(Problem("field \"\(name)\" must not contain U+0000 (NUL)"))
        }
        return .success(text)
    }
}
