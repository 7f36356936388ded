import Foundation

/// What a light command asks for.
public enum LightCommand: String, Sendable, Equatable {
    case on = "ON"
    case off = "OFF"
    case toggle = "TOGGLE"

    /// The light state after applying this command to `current`.
    public func applied(to current: Bool) -> Bool {
        switch self {
        case .on: true
        case .off: false
        case .toggle: !current
        }
    }

    /// `ON`, `OFF` or `TOGGLE` in any ASCII case. Only ASCII is folded: full Unicode upper-casing
    /// would read `oﬀ` (with the ligature ﬀ) as OFF.
    public init?(word: String) {
        guard word.unicodeScalars.allSatisfy(\.isASCII), let command = LightCommand(rawValue: word.uppercased()) else {
            return nil
        }
        self = command
    }

    /// The longest payload looked at; anything longer is not a command.
    public static let maxPayloadBytes = 256

    /// Parses a command payload: `ON`, `OFF`, `TOGGLE` in any case (surrounding white space
    /// ignored), or a JSON object whose `state` is one of those.
    public static func parse(_ payload: [UInt8]) -> Result<LightCommand, CommandRejection> {
        if payload.isEmpty { return .failure(.badPayload("empty payload")) }
        if payload.count > maxPayloadBytes {
            return .failure(.badPayload("payload of \(payload.count) bytes is longer than \(maxPayloadBytes)"))
        }
        guard let text = String(validating: payload, as: UTF8.self) else {
            return .failure(.badPayload("payload is not valid UTF-8"))
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") { return parseJSON(trimmed) }
        if let command = LightCommand(word: trimmed) { return .success(command) }
        return .failure(.badPayload("unknown command \(quoted(trimmed)); expected ON, OFF, TOGGLE or {\"state\":\"ON\"}"))
    }

    private static func parseJSON(_ text: String) -> Result<LightCommand, CommandRejection> {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(text.utf8))
        } catch {
            return .failure(.badPayload("payload is not valid JSON"))
        }
        guard let dictionary = object as? [String: Any] else {
            return .failure(.badPayload("JSON payload must be an object"))
        }
        guard let state = dictionary["state"] else {
            return .failure(.badPayload("JSON payload has no \"state\" field"))
        }
        guard let word = state as? String else {
            return .failure(.badPayload("JSON field \"state\" must be a string"))
        }
        guard let command = LightCommand(word: word) else {
            return .failure(.badPayload("JSON field \"state\" is \(quoted(word)); expected ON, OFF or TOGGLE"))
        }
        return .success(command)
    }

    /// Shows a short, printable excerpt of untrusted text in messages.
    static func quoted(_ text: String) -> String {
        let printable = String(text.unicodeScalars.prefix(40).map { $0.value < 0x20 ? "?" : Character($0) })
        return "\"\(printable)\(text.unicodeScalars.count > 40 ? "…" : "")\""
    }
}

/// Why a command was not applied.
public enum CommandRejection: Error, Sendable, Equatable, CustomStringConvertible {
    case badPayload(String)
    case unknownUser(String)
    case unknownRoom(user: String, room: String)
    case notALight(sensor: String)
    case noLights(room: String)
    case unknownGroup(user: String, group: String)
    /// A REST upstream refused the forwarded command (or could not be reached: status 0).
    case upstream(status: Int, detail: String)
    /// Cluster: the instance that owns the user did not confirm a relayed command in time.
    case ownerTimeout(seconds: Double)
    /// A bound light's device did not confirm the command within `devices.command_timeout`.
    case deviceTimeout(seconds: Double)
    /// Cluster: the instance that owns the user is offline, so a relayed command was not sent.
    case ownerOffline(instance: Int)
    /// The user sent more than `commands.rate` / `commands.burst` allow; a command is admitted
    /// again after this many seconds.
    case rateLimited(retryAfter: Double)

    /// Whoever had to carry the command out did not answer: the owning instance (cluster) or the
    /// light's device (the API says 504, a gateway time-out).
    public var isGatewayTimeout: Bool {
        switch self {
        case .ownerTimeout, .ownerOffline, .deviceTimeout: true
        default: false
        }
    }

    /// A short machine-friendly code for the `command_rejected` event.
    public var code: String {
        switch self {
        case .badPayload: "bad_payload"
        case .unknownUser: "unknown_user"
        case .unknownRoom: "unknown_room"
        case .notALight: "not_a_light"
        case .noLights: "no_lights"
        case .unknownGroup: "unknown_group"
        case .upstream: "upstream_refused"
        case .ownerTimeout: "owner_timeout"
        case .ownerOffline: "owner_offline"
        case .deviceTimeout: "device_timeout"
        case .rateLimited: "rate_limited"
        }
    }

    public var description: String {
        switch self {
        case .badPayload(let why): "bad payload: \(why)"
        case .unknownUser(let user): "unknown user \(LightCommand.quoted(user))"
        case .unknownRoom(let user, let room): "user \(user) has no room \(LightCommand.quoted(room))"
        case .notALight(let sensor): "\(LightCommand.quoted(sensor)) is not a light; only lights take commands"
        case .noLights(let room): room == "*" ? "no room of this user has lights" : "room \(room) has no lights"
        case .unknownGroup(let user, let group): "user \(user) has no group \(LightCommand.quoted(group))"
        case .upstream(let status, let detail):
            status == 0 ? "upstream unreachable: \(detail)" : "upstream answered \(status): \(detail)"
        case .ownerTimeout(let seconds):
            "the bridge instance that owns this user did not confirm the command within \(Int(seconds.rounded(.up))) s"
        case .deviceTimeout(let seconds):
            "the light's device did not confirm the command within \(FixedDecimals.text(seconds, decimals: 1)) s"
        case .ownerOffline(let instance):
            "the bridge instance that owns this user (\(instance)) is offline, so it did not confirm the command"
        case .rateLimited(let wait):
            "too many light commands (commands.rate, commands.burst); try again in \(Self.wholeSeconds(wait)) s"
        }
    }

    /// Seconds to wait, rounded up to a whole one (at least 1), as `Retry-After` has them.
    public static func wholeSeconds(_ wait: Double) -> Int { max(1, Int(wait.rounded(.up)))
    }
}
