import Foundation

/// Turns a parsed config document plus `SMARTHOME_*` environment variables into a
/// `BridgeConfiguration`, reporting every problem by key path instead of stopping at the first.
public struct ConfigLoader {
    /// Every scalar key the file may set. The environment variable of a key is `SMARTHOME_` and
    /// the path in upper case with dots as underscores (`mqtt.base_topic` → `SMARTHOME_MQTT_BASE_TOPIC`).
    public static let scalarKeys: [String] = [
        "mqtt.url", "mqtt.embedded_port", "mqtt.base_topic", "mqtt.client_id", "mqtt.username", "mqtt.password", "mqtt.password_file",
        "mqtt.qos", "mqtt.keepalive", "mqtt.reconnect_min", "mqtt.reconnect_max", "mqtt.max_queued",
        "mqtt.tls.ca", "mqtt.tls.cert", "mqtt.tls.key", "mqtt.tls.verify",
        "http.bind", "http.port", "http.legacy_routes", "http.session_ttl", "http.max_connections",
        "http.max_connections_per_address", "http.connection_timeout", "http.request_head_timeout",
        "http.max_streams_per_token", "http.max_streams_per_user", "http.max_header_bytes",
        "http.max_body_bytes", "http.threads", "http.web_root", "http.tls.cert", "http.tls.key",
        "http.allowed_hosts", "http.trusted_proxies",
        "source.kind", "source.interval", "source.seed", "source.base_url", "source.timeout", "source.concurrency",
        "source.failures_before_offline", "source.max_backoff",
        "source.lights_command.method", "source.lights_command.path", "source.lights_command.body",
        "publish.refresh",
        "storage.path", "storage.retention_days",
        "homeassistant.discovery", "homeassistant.prefix",
        "scheduler.timezone", "scheduler.grace",
        "log.level",
        "cluster.instances", "cluster.index", "cluster.secret", "cluster.command_timeout", "cluster.mirror_idle",
    ]

    public static func environmentName(of path: String) -> String {
        "SMARTHOME_" + path.uppercased().replacing(".", with: "_")
    }

    private var values: [String: ConfigNode] = [:]
    private var fromEnvironment: [String: String] = [:]
    private var usersNode: ConfigNode?
    private var issues: [ConfigIssue] = []

    /// Validates `document` with `environment` applied on top.
    /// - Returns: the configuration, or every problem found, each naming its key path.
    public static func load(_ document: ConfigNode, environment: [String: String])
        -> Result<BridgeConfiguration, ConfigIssues>
    {
        var loader = ConfigLoader()
        loader.collect(document, prefix: "")
        loader.applyEnvironment(environment)
        let configuration = loader.decode()
        return loader.issues.isEmpty ? .success(configuration) : .failure(ConfigIssues(issues: loader.issues))
    }

    // MARK: Walking the document

    private mutating func collect(_ node: ConfigNode, prefix: String) {
        guard case .mapping(let members, _) = node else {
            if case .null = node, !prefix.isEmpty { return }
            issue(prefix, "must be a mapping of keys", line: node.line)
            return
        }
        var seen: Set<String> = []
        for (key, value) in members {
            let path = prefix.isEmpty ? key : "\(prefix).\(key)"
            if !seen.insert(key).inserted {
                issue(path, "is set twice", line: value.line)
                continue
            }
            if path == "users" {
                usersNode = value
            } else if ConfigLoader.scalarKeys.contains(path) {
                values[path] = value
            } else if ConfigLoader.scalarKeys.contains(where: { $0.hasPrefix(path + ".") }) {
                collect(value, prefix: path)
            } else {
                issue(path, "is not a known key", line: value.line)
            }
        }
    }

    private mutating func applyEnvironment(_ environment: [String: String]) {
        for path in ConfigLoader.scalarKeys {
            let name = ConfigLoader.environmentName(of: path)
            guard let value = environment[name] else { continue }
            values[path] = .scalar(value, isQuoted: false, line: 0)
            fromEnvironment[path] = name
        }
    }

    private mutating func issue(_ path: String, _ message: String, line: Int = 0) {
        let shown = fromEnvironment[path].map { "\(path) (from \($0))" } ?? path
        issues.append(ConfigIssue(path: shown, message: message, line: line))
    }

    // MARK: Typed values

    /// The text of a scalar key, `nil` when absent or null.
    private mutating func string(_ path: String) -> String? {
        switch values[path] {
        case nil, .null?: return nil
        case .scalar(let text, _, _)?: return text
        case let node?:
            issue(path, "must be a single value, not a list or mapping", line: node.line)
            return nil
        }
    }

    private mutating func nonEmptyString(_ path: String) -> String? {
        guard let text = string(path) else { return nil }
        if text.isEmpty {
            issue(path, "must not be empty", line: values[path]?.line ?? 0)
            return nil
        }
        return text
    }

    private mutating func int(_ path: String, in range: ClosedRange<Int>, default fallback: Int) -> Int {
        guard let text = string(path) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            issue(path, "must be a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(text)\"",
                  line: values[path]?.line ?? 0)
            return fallback
        }
        return value
    }

    private mutating func bool(_ path: String, default fallback: Bool) -> Bool {
        guard let text = string(path) else { return fallback }
        switch text.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default:
            issue(path, "must be true or false, got \"\(text)\"", line: values[path]?.line ?? 0)
            return fallback
        }
    }

    /// Seconds, written as a number (`30`, `0.5`) or with a unit (`500ms`, `30s`, `5m`, `2h`, `30d`).
    private mutating func duration(_ path: String, in range: ClosedRange<Double>, default fallback: Double) -> Double {
        guard let text = string(path) else { return fallback }
        guard let seconds = ConfigLoader.parseDuration(text), range.contains(seconds) else {
            issue(path, "must be a duration from \(range.lowerBound) to \(range.upperBound) seconds "
                + "(a number of seconds or e.g. 30s, 5m, 2h, 30d), got \"\(text)\"", line: values[path]?.line ?? 0)
            return fallback
        }
        return seconds
    }

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

    private mutating func oneOf<T: RawRepresentable & CaseIterable>(_ path: String, default fallback: T) -> T
    where T.RawValue == String {
        guard let text = string(path) else { return fallback }
        guard let value = T(rawValue: text.lowercased()) else {
            let choices = T.allCases.map(\.rawValue).joined(separator: ", ")
            issue(path, "must be one of \(choices), got \"\(text)\"", line: values[path]?.line ?? 0)
            return fallback
        }
        return value
    }

    // MARK: Sections

    private mutating func decode() -> BridgeConfiguration {
        var config = BridgeConfiguration()
        decodeMQTT(into: &config.mqtt)
        decodeHTTP(into: &config.http)
        decodeSource(into: &config.source)
        config.publish.refresh = duration("publish.refresh", in: 1...604_800, default: config.publish.refresh)
        config.storage.path = nonEmptyString("storage.path") ?? config.storage.path
        config.storage.retentionDays = int("storage.retention_days", in: 1...36_500, default: config.storage.retentionDays)
        config.homeAssistant.discovery = bool("homeassistant.discovery", default: config.homeAssistant.discovery)
        if let prefix = nonEmptyString("homeassistant.prefix") {
            if let problem = Topics.validateBase(prefix) {
                issue("homeassistant.prefix", problem, line: values["homeassistant.prefix"]?.line ?? 0)
            } else {
                config.homeAssistant.prefix = prefix
            }
        }
        config.scheduler.timezone = nonEmptyString("scheduler.timezone")
        if let zone = config.scheduler.timezone, TimeZone(identifier: zone) == nil {
            issue("scheduler.timezone", "is not a known time zone (e.g. Europe/Istanbul), got \"\(zone)\"",
                  line: values["scheduler.timezone"]?.line ?? 0)
        }
        config.scheduler.grace = duration("scheduler.grace", in: 0...86_400, default: config.scheduler.grace)
        config.log.level = oneOf("log.level", default: config.log.level)
        config.cluster.instances = int("cluster.instances", in: 1...1024, default: 1)
        config.cluster.index = int("cluster.index", in: 0...1023, default: 0)
        if config.cluster.index >= config.cluster.instances {
            issue("cluster.index", "must be less than cluster.instances (\(config.cluster.instances))",
                  line: values["cluster.index"]?.line ?? 0)
        }
        config.cluster.secret = nonEmptyString("cluster.secret")
        config.cluster.commandTimeout = duration("cluster.command_timeout", in: 0.1...60,
                                                 default: config.cluster.commandTimeout)
        validateClusterSecret(config.cluster)
        config.users = UsersDecoder.decode(usersNode, issues: &issues)
        return config
    }

    /// The secret keys every instance's session tokens, so it must be shared by all of them and hard
    /// to guess: 32 characters is 192 bits or more when they are random base64.
    private mutating func validateClusterSecret(_ cluster: BridgeConfiguration.Cluster) {
        let line = values["cluster.secret"]?.line ?? values["cluster.instances"]?.line ?? 0
        if let secret = cluster.secret, secret.count < BridgeConfiguration.Cluster.minimumSecretLength {
            issue("cluster.secret", "must be at least \(BridgeConfiguration.Cluster.minimumSecretLength) characters "
                  + "(e.g. from `openssl rand -base64 32`), got \(secret.count)", line: line)
        } else if cluster.secret == nil, cluster.instances > 1 {
            issue("cluster.secret", "is required when cluster.instances is more than 1: every instance must accept "
                  + "the others' session tokens", line: line)
        }
    }

    private mutating func decodeMQTT(into mqtt: inout BridgeConfiguration.MQTT) {
        if let text = nonEmptyString("mqtt.url") {
            switch BrokerURL.parse(text) {
            case .success(let url): mqtt.url = url
            case .failure(let problem): issue("mqtt.url", problem.message, line: values["mqtt.url"]?.line ?? 0)
            }
        }
        mqtt.embeddedPort = int("mqtt.embedded_port", in: 0...65_535, default: mqtt.embeddedPort)
        if let base = string("mqtt.base_topic") {
            if let problem = Topics.validateBase(base) {
                issue("mqtt.base_topic", problem, line: values["mqtt.base_topic"]?.line ?? 0)
            } else {
                mqtt.baseTopic = base
            }
        }
        mqtt.clientID = nonEmptyString("mqtt.client_id")
        if let id = mqtt.clientID, id.utf8.count > 65_535 {
            issue("mqtt.client_id", "is longer than MQTT allows", line: values["mqtt.client_id"]?.line ?? 0)
        }
        mqtt.username = nonEmptyString("mqtt.username")
        mqtt.password = string("mqtt.password")
        mqtt.passwordFile = nonEmptyString("mqtt.password_file")
        if mqtt.password != nil, mqtt.passwordFile != nil {
            issue("mqtt.password_file", "cannot be set together with mqtt.password",
                  line: values["mqtt.password_file"]?.line ?? 0)
        }
        if (mqtt.password != nil || mqtt.passwordFile != nil), mqtt.username == nil {
            issue("mqtt.username", "is required when a password is set")
        }
        mqtt.qos = int("mqtt.qos", in: 0...2, default: mqtt.qos)
        mqtt.keepalive = int("mqtt.keepalive", in: 5...65_535, default: mqtt.keepalive)
        mqtt.reconnectMin = duration("mqtt.reconnect_min", in: 0.1...3600, default: mqtt.reconnectMin)
        mqtt.reconnectMax = duration("mqtt.reconnect_max", in: 0.1...86_400, default: mqtt.reconnectMax)
        if mqtt.reconnectMax < mqtt.reconnectMin {
            issue("mqtt.reconnect_max", "must not be less than mqtt.reconnect_min",
                  line: values["mqtt.reconnect_max"]?.line ?? 0)
        }
        mqtt.maxQueued = int("mqtt.max_queued", in: 0...10_000_000, default: mqtt.maxQueued)
        mqtt.tlsCA = nonEmptyString("mqtt.tls.ca")
        mqtt.tlsCert = nonEmptyString("mqtt.tls.cert")
        mqtt.tlsKey = nonEmptyString("mqtt.tls.key")
        mqtt.tlsVerify = bool("mqtt.tls.verify", default: mqtt.tlsVerify)
        requireTogether("mqtt.tls.cert", mqtt.tlsCert, "mqtt.tls.key", mqtt.tlsKey)
    }

    /// Reports the missing one of two keys that only work together (a certificate and its key).
    private mutating func requireTogether(_ first: String, _ firstValue: String?, _ second: String, _ secondValue: String?) {
        guard (firstValue == nil) != (secondValue == nil) else { return }
        issue(firstValue == nil ? first : second, "must be set together with \(firstValue == nil ? second : first)")
    }

    private mutating func decodeHTTP(into http: inout BridgeConfiguration.HTTP) {
        http.bind = nonEmptyString("http.bind") ?? http.bind
        http.port = int("http.port", in: 0...65_535, default: http.port)
        http.legacyRoutes = bool("http.legacy_routes", default: http.legacyRoutes)
        http.sessionTTL = duration("http.session_ttl", in: 1...(3650 * 86_400), default: http.sessionTTL)
        http.maxConnections = int("http.max_connections", in: 1...100_000, default: http.maxConnections)
        http.maxConnectionsPerAddress = int("http.max_connections_per_address", in: 1...100_000,
                                            default: http.maxConnectionsPerAddress)
        http.connectionTimeout = duration("http.connection_timeout", in: 1...3600, default: http.connectionTimeout)
        http.requestHeadTimeout = duration("http.request_head_timeout", in: 1...3600, default: http.requestHeadTimeout)
        http.maxStreamsPerToken = int("http.max_streams_per_token", in: 1...10_000, default: http.maxStreamsPerToken)
        http.maxStreamsPerUser = int("http.max_streams_per_user", in: 1...10_000, default: http.maxStreamsPerUser)
        http.maxHeaderBytes = int("http.max_header_bytes", in: 1024...1_048_576, default: http.maxHeaderBytes)
        http.maxBodyBytes = int("http.max_body_bytes", in: 0...104_857_600, default: http.maxBodyBytes)
        http.threads = int("http.threads", in: 1...256, default: http.threads)
        http.webRoot = nonEmptyString("http.web_root") ?? http.webRoot
        http.tlsCert = nonEmptyString("http.tls.cert")
        http.tlsKey = nonEmptyString("http.tls.key")
        requireTogether("http.tls.cert", http.tlsCert, "http.tls.key", http.tlsKey)
        http.allowedHosts = nonEmptyString("http.allowed_hosts")
        http.trustedProxies = nonEmptyString("http.trusted_proxies")
    }

    private mutating func decodeSource(into source: inout BridgeConfiguration.Source) {
        source.kind = oneOf("source.kind", default: source.kind)
        source.interval = duration("source.interval", in: 0...86_400, default: source.interval)
        if let text = string("source.seed") {
            if let seed = UInt64(text) { source.seed = seed } else {
                issue("source.seed", "must be a whole number from 0 to \(UInt64.max), got \"\(text)\"",
                      line: values["source.seed"]?.line ?? 0)
            }
        }
        source.baseURL = nonEmptyString("source.base_url")
        if let url = source.baseURL, !(url.hasPrefix("http://") || url.hasPrefix("https://")) {
            issue("source.base_url", "must start with http:// or https://, got \"\(url)\"",
                  line: values["source.base_url"]?.line ?? 0)
        }
        if source.kind == .rest, source.baseURL == nil {
            issue("source.base_url", "is required when source.kind is rest")
        }
        source.timeout = duration("source.timeout", in: 0.1...600, default: source.timeout)
        source.concurrency = int("source.concurrency", in: 1...1024, default: source.concurrency)
        source.failuresBeforeOffline = int("source.failures_before_offline", in: 1...1000,
                                           default: source.failuresBeforeOffline)
        source.maxBackoff = duration("source.max_backoff", in: 1...86_400, default: source.maxBackoff)
        let method = (nonEmptyString("source.lights_command.method") ?? source.lightsCommand.method).uppercased()
        if !["GET", "POST", "PUT", "PATCH"].contains(method) {
            issue("source.lights_command.method", "must be GET, POST, PUT or PATCH, got \"\(method)\"",
                  line: values["source.lights_command.method"]?.line ?? 0)
        }
        source.lightsCommand.method = method
        source.lightsCommand.path = nonEmptyString("source.lights_command.path")
        source.lightsCommand.body = string("source.lights_command.body")
    }
}
