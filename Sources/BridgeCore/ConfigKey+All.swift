import Foundation

extension ConfigKey {
    /// Every key the config file may set (README "Configuration" lists them all), each with its decoder.
    /// Rules that involve two keys (a password needs a username, ...) are `ConfigLoader`'s.
    public static let all: [ConfigKey] = mqtt + http + source + [
        .duration("publish.refresh", \.publish.refresh, in: 1...604_800),
        .text("storage.path", \.storage.path),
        .int("storage.retention_days", \.storage.retentionDays, in: 1...36_500),
        ConfigKey("storage.url") { value, config in
            guard let text = value.nonEmptyString() else { return }
            switch StorageURL.parse(text) {
            case .success(let url): config.storage.url = url
            case .failure(let problem): value.fail(problem.message)
            }
        },
        .bool("homeassistant.discovery", \.homeAssistant.discovery),
        ConfigKey("homeassistant.prefix") { value, config in
            guard let prefix = value.nonEmptyString() else { return }
            if let problem = Topics.validateBase(prefix) { value.fail(problem) } else { config.homeAssistant.prefix = prefix }
        },
        .bool("homie.enabled", \.homie.enabled),
        ConfigKey("homie.prefix") { value, config in
            guard let prefix = value.nonEmptyString() else { return }
            if let problem = HomieDevices.validatePrefix(prefix) { value.fail(problem) } else { config.homie.prefix = prefix }
        },
        ConfigKey("scheduler.timezone") { value, config in
            guard let zone = value.nonEmptyString() else { return }
            if TimeZone(identifier: zone) == nil {
                value.fail("is not a known time zone (e.g. Europe/Istanbul), got \"\(zone)\"")
            } else {
                config.scheduler.timezone = zone
            }
        },
        .duration("scheduler.grace", \.scheduler.grace, in: 0...86_400),
        .degrees("scheduler.latitude", \.scheduler.latitude, in: -90...90),
        .degrees("scheduler.longitude", \.scheduler.longitude, in: -180...180),
        .int("watchdogs.max_per_user", \.watchdogs.maxPerUser, in: 0...10_000),
        .int("alarms.max_per_user", \.alarms.maxPerUser, in: 0...100_000),
        .number("commands.rate", \.commands.rate, in: 0.01...100_000),
        .int("commands.burst", \.commands.burst, in: 1...1_000_000),
        .int("notify.attempts", \.notify.attempts, in: 1...20),
        .duration("notify.backoff", \.notify.backoff, in: 0.01...3600),
        .duration("notify.max_backoff", \.notify.maxBackoff, in: 0.01...86_400),
        .duration("notify.timeout", \.notify.timeout, in: 0.1...120),
        .int("notify.max_queued", \.notify.maxQueued, in: 1...100_000),
        .int("notify.concurrency", \.notify.concurrency, in: 1...64),
        .choice("log.level", \.log.level),
        .int("cluster.instances", \.cluster.instances, in: 1...1024),
        .int("cluster.index", \.cluster.index, in: 0...1023),
        .text("cluster.secret", \.cluster.secret),
        .duration("cluster.command_timeout", \.cluster.commandTimeout, in: 0.1...60),
        .duration("cluster.mirror_idle", \.cluster.mirrorIdle, in: 1...86_400),
        .duration("cluster.lease", \.cluster.lease, in: 1...3600),
        ConfigKey("devices.mqtt.url") { value, config in
            guard let text = value.nonEmptyString() else { return }
            switch BrokerURL.parse(text) {
            case .success(let url): config.devices.mqttURL = url
            case .failure(let problem): value.fail(problem.message)
            }
        },
        .text("devices.mqtt.username", \.devices.mqttUsername),
        .text("devices.mqtt.password", \.devices.mqttPassword),
        ConfigKey("devices.zigbee2mqtt.base_topic") { value, config in
            guard let base = value.nonEmptyString() else { return }
            if let problem = Topics.validateBase(base) { value.fail(problem) } else { config.devices.zigbeeBaseTopic = base }
        },
        .duration("devices.command_timeout", \.devices.commandTimeout, in: 0.1...120),
    ]

    private static let mqtt: [ConfigKey] = [
        ConfigKey("mqtt.url") { value, config in
            guard let text = value.nonEmptyString() else { return }
            switch BrokerURL.parse(text) {
            case .success(let url): config.mqtt.url = url
            case .failure(let problem): value.fail(problem.message)
            }
        },
        .int("mqtt.embedded_port", \.mqtt.embeddedPort, in: 0...65_535),
        ConfigKey("mqtt.base_topic") { value, config in
            guard let base = value.string() else { return }
            if let problem = Topics.validateBase(base) { value.fail(problem) } else { config.mqtt.baseTopic = base }
        },
        ConfigKey("mqtt.client_id") { value, config in
            guard let id = value.nonEmptyString() else { return }
            if id.utf8.count > 65_535 { value.fail("is longer than MQTT allows") } else { config.mqtt.clientID = id }
        },
        .text("mqtt.username", \.mqtt.username),
        // An empty password is a password (mosquitto accepts one), so only a missing value is "none".
        ConfigKey("mqtt.password") { value, config in config.mqtt.password = value.string() },
        .text("mqtt.password_file", \.mqtt.passwordFile),
        .int("mqtt.qos", \.mqtt.qos, in: 0...2),
        .wholeSeconds("mqtt.keepalive", \.mqtt.keepalive, in: 5...65_535),
        .duration("mqtt.reconnect_min", \.mqtt.reconnectMin, in: 0.1...3600),
        .duration("mqtt.reconnect_max", \.mqtt.reconnectMax, in: 0.1...86_400),
        .int("mqtt.max_queued", \.mqtt.maxQueued, in: 0...10_000_000),
        .text("mqtt.tls.ca", \.mqtt.tlsCA),
        .text("mqtt.tls.cert", \.mqtt.tlsCert),
        .text("mqtt.tls.key", \.mqtt.tlsKey),
        .bool("mqtt.tls.verify", \.mqtt.tlsVerify),
    ]

    private static let http: [ConfigKey] = [
        .text("http.bind", \.http.bind),
        .int("http.port", \.http.port, in: 0...65_535),
        .bool("http.legacy_routes", \.http.legacyRoutes),
        .int("http.max_connections", \.http.maxConnections, in: 1...100_000),
        .int("http.max_connections_per_address", \.http.maxConnectionsPerAddress, in: 1...100_000),
        .duration("http.connection_timeout", \.http.connectionTimeout, in: 1...3600),
        .int("http.max_header_bytes", \.http.maxHeaderBytes, in: 1024...1_048_576),
        .int("http.max_body_bytes", \.http.maxBodyBytes, in: 0...104_857_600),
        .int("http.threads", \.http.threads, in: 1...256),
        .duration("http.session_ttl", \.http.sessionTTL, in: 1...(3650 * 86_400)),
        .text("http.web_root", \.http.webRoot),
        .duration("http.request_head_timeout", \.http.requestHeadTimeout, in: 1...3600),
        .int("http.max_streams_per_token", \.http.maxStreamsPerToken, in: 1...10_000),
        .int("http.max_streams_per_user", \.http.maxStreamsPerUser, in: 1...10_000),
        .text("http.tls.cert", \.http.tlsCert),
        .text("http.tls.key", \.http.tlsKey),
        .text("http.allowed_hosts", \.http.allowedHosts),
        .text("http.trusted_proxies", \.http.trustedProxies),
        .text("http.metrics_token", \.http.metricsToken),
    ]

    private static let source: [ConfigKey] = [
        .choice("source.kind", \.source.kind),
        .duration("source.interval", \.source.interval, in: 0...86_400),
        ConfigKey("source.seed") { value, config in
            guard let text = value.string() else { return }
            if let seed = UInt64(text) {
                config.source.seed = seed
            } else {
                value.fail("must be a whole number from 0 to \(UInt64.max), got \"\(text)\"")
            }
        },
        ConfigKey("source.base_url") { value, config in
            guard let url = value.nonEmptyString() else { return }
            if url.hasPrefix("http://") || url.hasPrefix("https://") {
                config.source.baseURL = url
            } else {
                value.fail("must start with http:// or https://, got \"\(url)\"")
            }
        },
        .duration("source.timeout", \.source.timeout, in: 0.1...600),
        .int("source.concurrency", \.source.concurrency, in: 1...1024),
        .int("source.failures_before_offline", \.source.failuresBeforeOffline, in: 1...1000),
        .duration("source.max_backoff", \.source.maxBackoff, in: 1...86_400),
        ConfigKey("source.lights_command.method") { value, config in
            guard let method = value.nonEmptyString()?.uppercased() else { return }
            if ["GET", "POST", "PUT", "PATCH"].contains(method) {
                config.source.lightsCommand.method = method
            } else {
                value.fail("must be GET, POST, PUT or PATCH, got \"\(method)\"")
            }
        },
        .text("source.lights_command.path", \.source.lightsCommand.path),
        ConfigKey("source.lights_command.body") { value, config in config.source.lightsCommand.body = value.string() },
    ]
}
