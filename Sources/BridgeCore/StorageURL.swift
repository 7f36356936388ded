import Foundation

/// Where the bridge keeps its state (README "PostgreSQL"): a SQLite file (the default, from
/// `storage.path`) or a PostgreSQL database that several cluster instances share.
///
/// Its `description` never shows the password, so it may go into any log line or error message.
public enum StorageURL: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(Postgres)

    /// A PostgreSQL server and database, as libpq takes them.
    public struct Postgres: Sendable, Equatable {
        public var user: String
        public var password: String?
        public var host: String
        public var port: Int
        public var database: String

        public init(user: String, password: String?, host: String, port: Int = 5432, database: String) {
            self.user = user
            self.password = password
            self.host = host
            self.port = port
            self.database = database
        }
    }

    public var isPostgres: Bool { if case .postgres = self { true } else { false } }

    public var description: String {
        switch self {
        case .sqlite(let path): "sqlite://\(path)"
        case .postgres(let server):
            "postgres://\(server.user)\(server.password == nil ? "" : ":***")@\(server.host):\(server.port)/\(server.database)"
        }
    }

    /// Parses `sqlite:///path/file.sqlite` (an absolute path; `sqlite://./relative.sqlite` for one
    /// relative to the working directory) or `postgres://user:password@host:port/db` (`postgresql://`
    /// too; the port defaults to 5432; user and password may be percent-encoded). The problem names
    /// what is wrong and never repeats the password.
    public static func parse(_ text: String) -> Result<StorageURL, ConfigIssue> {
        if text.hasPrefix("sqlite://") {
            let path = String(text.dropFirst("sqlite://".count))
            guard !path.isEmpty else { return .failure(ConfigIssue(path: "", message: "names no file: use sqlite:///path/bridge.sqlite")) }
            return .success(.sqlite(path: path))
        }
        let scheme = ["postgres://", "postgresql://"].first { text.hasPrefix($0) }
        guard let scheme else {
            return .failure(ConfigIssue(path: "", message: "must start with sqlite:// or postgres://, got \"\(redactingPassword(text))\""))
        }
        let rest = text.dropFirst(scheme.count)
        guard let at = rest.lastIndex(of: "@") else {
            return .failure(ConfigIssue(path: "", message: "needs a user: postgres://user:password@host:port/db"))
        }
        let credentials = rest[..<at]
        let location = rest[rest.index(after: at)...]
        let (rawUser, rawPassword): (Substring, Substring?) = credentials.firstIndex(of: ":").map {
            (credentials[..<$0], credentials[credentials.index(after: $0)...])
        } ?? (credentials, nil)
        guard let user = rawUser.removingPercentEncoding, !user.isEmpty else {
            return .failure(ConfigIssue(path: "", message: "needs a user: postgres://user:password@host:port/db"))
        }
        guard let slash = location.firstIndex(of: "/") else {
            return .failure(ConfigIssue(path: "", message: "needs a database name after the host: postgres://user:password@host:port/db"))
        }
        let database = String(location[location.index(after: slash)...])
        guard !database.isEmpty, !database.contains("/"), !database.contains("?") else {
            return .failure(ConfigIssue(path: "", message: "needs a database name after the host: postgres://user:password@host:port/db"))
        }
        let hostAndPort = location[..<slash]
        var host = String(hostAndPort)
        var port = 5432
        if let colon = hostAndPort.lastIndex(of: ":"), !hostAndPort.hasSuffix("]") {
            guard let number = Int(hostAndPort[hostAndPort.index(after: colon)...]), (1...65_535).contains(number) else {
                return .failure(ConfigIssue(path: "", message: "has a port that is not a number in 1...65535"))
            }
            port = number
            host = String(hostAndPort[..<colon])
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return .failure(ConfigIssue(path: "", message: "needs a host: postgres://user:password@host:port/db")) }
        return .success(.postgres(Postgres(user: user, password: rawPassword.map { $0.removingPercentEncoding ?? String($0) },
                                           host: host, port: port, database: database)))
    }

    /// `text` with whatever stands between `user:` and `@` replaced by `***`.
    static func redactingPassword(_ text: String) -> String {
        guard let schemeEnd = text.range(of: "://"), let at = text.lastIndex(of: "@"), at > schemeEnd.upperBound,
              let colon = text[schemeEnd.upperBound..<at].firstIndex(of: ":")
        else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }
}
