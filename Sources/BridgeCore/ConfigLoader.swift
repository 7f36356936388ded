/// Turns a parsed config document plus `SMARTHOME_*` environment variables into a
/// `BridgeConfiguration`, reporting every problem by key path instead of stopping at the first.
///
/// The keys and their decoders are `ConfigKey.all`; this type walks the document, lays the
/// environment over it, runs every decoder and then the rules that involve more than one key.
public struct ConfigLoader {
    /// Every scalar key the file may set, derived from `ConfigKey.all`.
    public static let scalarKeys: [String] = ConfigKey.all.map(\.path)

    /// Every section (`mqtt`, `mqtt.tls`, ...): a path that holds keys rather than a value.
    static let sections: Set<String> = Set(scalarKeys.flatMap { path in
        let parts = path.split(separator: ".")
        return (1..<parts.count).map { parts[..<$0].joined(separator: ".") }
    })

    public static func environmentName(of path: String) -> String { ConfigKey.environmentName(of: path) }

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
            } else if ConfigLoader.sections.contains(path) {
                collect(value, prefix: path)
            } else if ConfigLoader.scalarKeys.contains(path) {
                values[path] = value
            } else {
                issue(path, "is not a known key", line: value.line)
            }
        }
    }

    private mutating func applyEnvironment(_ environment: [String: String]) {
        for key in ConfigKey.all {
            guard let value = environment[key.environmentName] else { continue }
            values[key.path] = .scalar(value, isQuoted: false, line: 0)
            fromEnvironment[key.path] = key.environmentName
        }
    }

    /// The value of one key as the file and the environment give it.
    private func value(_ path: String) -> ConfigValue {
        ConfigValue(path: path, node: values[path], environmentName: fromEnvironment[path])
    }

    private mutating func issue(_ path: String, _ message: String, line: Int? = nil) {
        var value = value(path)
        value.fail(message, line: line)
        issues += value.issues
    }

    // MARK: Decoding

    private mutating func decode() -> BridgeConfiguration {
        var config = BridgeConfiguration()
        for key in ConfigKey.all {
            var value = value(key.path)
            key.decode(&value, &config)
            issues += value.issues
        }
        checkCombinations(config)
        // A URL's user:password@ stands for the keys (both at once is a problem checkCombinations
        // reported), so everything after this reads the credentials from the keys alone.
        if let url = config.mqtt.url {
            config.mqtt.username = config.mqtt.username ?? url.username
            if config.mqtt.passwordFile == nil { config.mqtt.password = config.mqtt.password ?? url.password }
        }
        if let url = config.devices.mqttURL {
            config.devices.mqttUsername = config.devices.mqttUsername ?? url.username
            config.devices.mqttPassword = config.devices.mqttPassword ?? url.password
        }
        config.users = UsersDecoder.decode(usersNode, issues: &issues)
        return config
    }

    /// The rules that involve more than one key.
    private mutating func checkCombinations(_ config: BridgeConfiguration) {
        let mqtt = config.mqtt
        if mqtt.password != nil, mqtt.passwordFile != nil {
            issue("mqtt.password_file", "cannot be set together with mqtt.password")
        }
        if mqtt.password != nil || mqtt.passwordFile != nil, mqtt.username == nil, mqtt.url?.username == nil,
           values["mqtt.username"] == nil {
            issue("mqtt.username", "is required when a password is set")
        }
        let devices = config.devices
        let credentials = [("mqtt.url", mqtt.url, "mqtt.username", mqtt.username != nil,
                            "mqtt.password or mqtt.password_file", mqtt.password != nil || mqtt.passwordFile != nil),
                           ("devices.mqtt.url", devices.mqttURL, "devices.mqtt.username", devices.mqttUsername != nil,
                            "devices.mqtt.password", devices.mqttPassword != nil)]
        for (key, url, userKey, userSet, passwordKey, passwordSet) in credentials {
            if url?.username != nil, userSet {
                issue(key, "has a user name (user@) and \(userKey) is set too: give the credentials in one place")
            } else if url?.password != nil, passwordSet {
                issue(key, "has a password (user:password@) and \(passwordKey) is set too: give it in one place")
            }
        }
        let scheduler = config.scheduler
        if (scheduler.latitude == nil) != (scheduler.longitude == nil) {
            let (missing, given) = scheduler.latitude == nil
                ? ("scheduler.latitude", "scheduler.longitude") : ("scheduler.longitude", "scheduler.latitude")
            if values[missing] == nil { issue(missing, "must be set together with \(given)") }
        }
        if mqtt.reconnectMax < mqtt.reconnectMin {
            issue("mqtt.reconnect_max", "must not be less than mqtt.reconnect_min")
        }
        requireTogether("mqtt.tls.cert", mqtt.tlsCert, "mqtt.tls.key", mqtt.tlsKey)
        requireTogether("http.tls.cert", config.http.tlsCert, "http.tls.key", config.http.tlsKey)
        if config.source.kind == .rest, values["source.base_url"] == nil {
            issue("source.base_url", "is required when source.kind is rest")
        }
        if config.cluster.index >= config.cluster.instances {
            issue("cluster.index", "must be less than cluster.instances (\(config.cluster.instances))")
        }
        checkClusterSecret(config.cluster)
    }

    /// Reports the missing one of two keys that only work together (a certificate and its key).
    private mutating func requireTogether(_ first: String, _ firstValue: String?, _ second: String, _ secondValue: String?) {
        guard (firstValue == nil) != (secondValue == nil) else { return }
        let (missing, given) = firstValue == nil ? (first, second) : (second, first)
        if values[missing] == nil { issue(missing, "must be set together with \(given)") }
    }

    /// The secret keys every instance's session tokens, so it must be shared by all of them and hard
    /// to guess: 32 characters is 192 bits or more when they are random base64.
    private mutating func checkClusterSecret(_ cluster: BridgeConfiguration.Cluster) {
        let line = values["cluster.secret"]?.line ?? values["cluster.instances"]?.line ?? 0
        if let secret = cluster.secret, secret.count < BridgeConfiguration.Cluster.minimumSecretLength {
            issue("cluster.secret", "must be at least \(BridgeConfiguration.Cluster.minimumSecretLength) characters "
                  + "(e.g. from `openssl rand -base64 32`), got \(secret.count)", line: line)
        } else if cluster.secret == nil, values["cluster.secret"] == nil, cluster.instances > 1 {
            issue("cluster.secret", "is required when cluster.instances is more than 1: every instance must accept "
                  + "the others' session tokens", line: line)
        }
    }
}
