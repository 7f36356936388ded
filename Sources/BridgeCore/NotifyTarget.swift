import Foundation

/// Where a user's notifications go (`users[].notify`, README "Notifications"). Its description
/// names the kind and the host only: URLs, headers and tokens may hold secrets and are never logged.
public enum NotifyTarget: Sendable, Equatable, CustomStringConvertible {
    /// A JSON POST of the event to `url`, with extra `headers` (e.g. an API key).
    case webhook(url: String, headers: [String: String])
    /// ntfy's publish API: a JSON POST of `{topic, title, message, priority, tags}` to the server's
    /// root `url`, with `Authorization: Bearer <token>` when a token is given.
    case ntfy(url: String, topic: String, token: String?)

    public var kind: String {
        switch self {
        case .webhook: "webhook"
        case .ntfy: "ntfy"
        }
    }

    public var description: String {
        let url = switch self {
        case .webhook(let url, _), .ntfy(let url, _, _): url
        }
        let host = URLComponents(string: url).flatMap { parts in
            parts.host.map { $0 + (parts.port.map { ":\($0)" } ?? "") }
        } ?? "?"
        return "\(kind) \(host)"
    }
}
