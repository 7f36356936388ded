import Testing
@testable import BridgeCore

@Suite struct ConfigLoaderTests {
    func load(_ pairs: KeyValuePairs<String, Any>, environment: [String: String] = [:])
        -> Result<BridgeConfiguration, ConfigIssues>
    {
        ConfigLoader.load(Fixtures.node(pairs), environment: environment)
    }

    func issues(_ pairs: KeyValuePairs<String, Any>, environment: [String: String] = [:]) -> [ConfigIssue] {
        guard case .failure(let problems) = load(pairs, environment: environment) else { return [] }
        return problems.issues
    }

    @Test func defaultsApplyWhenOnlyUsersAreGiven() throws {
        let config = try load(["users": Fixtures.minimalUsers]).get()
        #expect(config.mqtt.url == nil)
        #expect(config.mqtt.baseTopic == "smarthome")
        #expect(config.mqtt.qos == 1)
        #expect(config.mqtt.keepalive == 30)
        #expect(config.http.bind == "127.0.0.1")
        #expect(config.http.port == 8080)
        #expect(!config.http.legacyRoutes)
        #expect(config.source.kind == .simulated)
        #expect(config.source.interval == 5)
        #expect(config.storage.path == "./data/bridge.sqlite")
        #expect(config.storage.location == .sqlite(path: "./data/bridge.sqlite"), "storage.url defaults to storage.path")
        #expect(config.cluster.lease == 10)
        #expect(config.homeAssistant.discovery)
        #expect(config.log.level == .info)
        #expect(config.publish.refresh == 300)
        #expect(config.users.map(\.id) == ["1"])
        #expect(config.users[0].rooms.map(\.id) == ["kitchen", "garden"])
        #expect(config.users[0].rooms[0].sensors.contains(.gas))
    }

    @Test func everyContractKeyIsAccepted() throws {
        let config = try load([
            "mqtt": ["url": "mqtt://broker:1884", "base_topic": "home", "username": "bridge", "password": "pw",
                     "qos": 0, "keepalive": 10, "reconnect_min": "2s", "reconnect_max": "90s", "max_queued": 50,
                     "tls": ["verify": false] as KeyValuePairs<String, Any>] as KeyValuePairs<String, Any>,
            "http": ["bind": "0.0.0.0", "port": 9090, "legacy_routes": true, "session_ttl": "7d"]
                as KeyValuePairs<String, Any>,
            "source": ["kind": "rest", "interval": "0.5", "base_url": "http://127.0.0.1:8081", "timeout": "2s",
                       "concurrency": 4, "failures_before_offline": 2, "max_backoff": "5m", "seed": 9,
                       "lights_command": ["method": "put", "path": "/lights/{userID}/{room}",
                                          "body": "{\"state\":\"{state}\"}"] as KeyValuePairs<String, Any>]
                as KeyValuePairs<String, Any>,
            "publish": ["refresh": "10m"] as KeyValuePairs<String, Any>,
            "storage": ["path": "/tmp/x.sqlite", "retention_days": 7] as KeyValuePairs<String, Any>,
            "homeassistant": ["discovery": false, "prefix": "ha"] as KeyValuePairs<String, Any>,
            "scheduler": ["timezone": "Europe/Istanbul", "grace": "15m"] as KeyValuePairs<String, Any>,
            "log": ["level": "debug"] as KeyValuePairs<String, Any>,
            "cluster": ["instances": 3, "index": 2, "secret": String(repeating: "k", count: 32),
                        "mirror_idle": "2m"] as KeyValuePairs<String, Any>,
            "users": Fixtures.minimalUsers,
        ]).get()
        #expect(config.mqtt.url == BrokerURL(host: "broker", port: 1884, tls: false))
        #expect(config.mqtt.baseTopic == "home")
        #expect(config.mqtt.qos == 0)
        #expect(config.mqtt.keepalive == 10)
        #expect(config.mqtt.reconnectMin == 2)
        #expect(config.mqtt.reconnectMax == 90)
        #expect(config.mqtt.maxQueued == 50)
        #expect(!config.mqtt.tlsVerify)
        #expect(config.http.sessionTTL == 7 * 86_400)
        #expect(config.source.kind == .rest)
        #expect(config.source.interval == 0.5)
        #expect(config.source.lightsCommand.method == "PUT")
        #expect(config.homeAssistant.prefix == "ha")
        #expect(config.cluster.index == 2)
        #expect(config.cluster.mirrorIdle == 120)
        #expect(config.log.level == .debug)
    }

    @Test func theRequestHeadDeadlineIsADurationWithADefault() throws {
        #expect(try load(["users": Fixtures.minimalUsers]).get().http.requestHeadTimeout == 10)
        let set = try load(["http": ["request_head_timeout": "5s"] as KeyValuePairs<String, Any>,
                            "users": Fixtures.minimalUsers]).get()
        #expect(set.http.requestHeadTimeout == 5)
        let bad = issues(["http": ["request_head_timeout": "0"] as KeyValuePairs<String, Any>,
                          "users": Fixtures.minimalUsers])
        #expect(bad.map(\.path) == ["http.request_head_timeout"])
    }

    @Test func eventStreamLimitsPerTokenAndUser() throws {
        let defaults = try load(["users": Fixtures.minimalUsers]).get().http
        #expect((defaults.maxStreamsPerToken, defaults.maxStreamsPerUser) == (8, 16))
        let set = try load(["http": ["max_streams_per_token": 2, "max_streams_per_user": 3] as KeyValuePairs<String, Any>,
                            "users": Fixtures.minimalUsers]).get().http
        #expect((set.maxStreamsPerToken, set.maxStreamsPerUser) == (2, 3))
        let bad = issues(["http": ["max_streams_per_token": 0] as KeyValuePairs<String, Any>,
                          "users": Fixtures.minimalUsers])
        #expect(bad.map(\.path) == ["http.max_streams_per_token"])
    }

    @Test func theClusterSecretIsLongAndRequiredForSeveralInstances() throws {
        let short = issues(["cluster": ["secret": "too-short"] as KeyValuePairs<String, Any>,
                            "users": Fixtures.minimalUsers])
        #expect(short.map(\.path) == ["cluster.secret"])
        #expect(short.first?.message.contains("at least 32 characters") == true, "\(short)")
        let missing = issues(["users": Fixtures.minimalUsers], environment: ["SMARTHOME_CLUSTER_INSTANCES": "2"])
        #expect(missing.map(\.path) == ["cluster.secret"])
        #expect(missing.first?.message.contains("required") == true, "\(missing)")
        let secret = String(repeating: "x", count: 32)
        let two = try load(["users": Fixtures.minimalUsers],
                           environment: ["SMARTHOME_CLUSTER_INSTANCES": "2", "SMARTHOME_CLUSTER_SECRET": secret]).get()
        #expect(two.cluster.secret == secret)
        #expect(try load(["users": Fixtures.minimalUsers]).get().cluster.secret == nil, "one instance needs none")
    }

    @Test func environmentOverridesTheFile() throws {
        let config = try load(
            ["mqtt": ["base_topic": "file"] as KeyValuePairs<String, Any>, "users": Fixtures.minimalUsers],
            environment: ["SMARTHOME_MQTT_BASE_TOPIC": "env", "SMARTHOME_MQTT_URL": "mqtt://10.0.0.1",
                          "SMARTHOME_HTTP_PORT": "1234", "SMARTHOME_HTTP_LEGACY_ROUTES": "true",
                          "SMARTHOME_HOMEASSISTANT_DISCOVERY": "false", "SMARTHOME_SOURCE_INTERVAL": "1"]
        ).get()
        #expect(config.mqtt.baseTopic == "env")
        #expect(config.mqtt.url == BrokerURL(host: "10.0.0.1", port: 1883, tls: false))
        #expect(config.http.port == 1234)
        #expect(config.http.legacyRoutes)
        #expect(!config.homeAssistant.discovery)
        #expect(config.source.interval == 1)
        #expect(ConfigLoader.environmentName(of: "mqtt.tls.ca") == "SMARTHOME_MQTT_TLS_CA")
    }

    @Test func unknownEnvironmentVariablesAreNamedWithTheLikelyKey() {
        let warnings = ConfigLoader.unknownEnvironment([
            "SMARTHOME_MQTT_BASETOPIC": "x", "SMARTHOME_HTTP_PROT": "1", "smarthome_mqtt_url": "mqtt://h",
            "SMARTHOME_FAVOURITE_COLOUR": "red", "SMARTHOME_" + String(repeating: "A", count: 5000): "",
            "SMARTHOME_CONFIG": "x.yaml", "SMARTHOME_MQTT_URL": "mqtt://h", "PATH": "/bin", "HOME": "/root",
        ])
        let byName = Dictionary(uniqueKeysWithValues: warnings.map { ($0.path, $0.message) })
        #expect(byName.count == 5, "\(warnings)")
        #expect(byName["SMARTHOME_MQTT_BASETOPIC"]?.contains("did you mean SMARTHOME_MQTT_BASE_TOPIC (mqtt.base_topic)?")
                == true)
        #expect(byName["SMARTHOME_HTTP_PROT"]?.contains("did you mean SMARTHOME_HTTP_PORT (http.port)?") == true)
        #expect(byName["smarthome_mqtt_url"]?.contains("did you mean SMARTHOME_MQTT_URL (mqtt.url)?") == true)
        #expect(byName["SMARTHOME_FAVOURITE_COLOUR"] == "is not a known variable and is ignored")
        #expect(byName["SMARTHOME_" + String(repeating: "A", count: 5000)] == "is not a known variable and is ignored")
        #expect(ConfigLoader.unknownEnvironment(["SMARTHOME_CONFIG": "a", "SMARTHOME_CLUSTER_MIRROR_IDLE": "1m"]).isEmpty)
    }

    @Test func editDistance() {
        #expect(ConfigLoader.editDistance(Array("kitten".utf8), Array("sitting".utf8)) == 3)
        #expect(ConfigLoader.editDistance([], Array("abc".utf8)) == 3)
        #expect(ConfigLoader.editDistance(Array("same".utf8), Array("same".utf8)) == 0)
    }

    @Test func badEnvironmentValuesNameTheVariable() {
        let found = issues(["users": Fixtures.minimalUsers], environment: ["SMARTHOME_MQTT_QOS": "7"])
        #expect(found.map(\.path) == ["mqtt.qos (from SMARTHOME_MQTT_QOS)"])
    }

    @Test func everyProblemIsReportedWithItsKeyPath() {
        let found = issues([
            "mqtt": ["url": "http://x", "qos": 3, "keepalive": "soon", "colour": "red"] as KeyValuePairs<String, Any>,
            "http": ["port": 70000, "legacy_routes": "maybe"] as KeyValuePairs<String, Any>,
            "source": ["kind": "magic", "interval": "-1"] as KeyValuePairs<String, Any>,
            "log": ["level": "loud"] as KeyValuePairs<String, Any>,
            "extra": 1,
            "users": [
                ["id": "1", "username": "a", "password_hash": "plain", "rooms": ["Kitchen", "kitchen"]]
                    as KeyValuePairs<String, Any>,
                ["id": "a/b", "username": "b", "password_hash": "$argon2id$x",
                 "rooms": [["name": "Attic", "sensors": ["Temperature", "Pressure"]] as KeyValuePairs<String, Any>]]
                    as KeyValuePairs<String, Any>,
                ["username": "c", "password_hash": "$argon2id$x", "rooms": [] as [Any]] as KeyValuePairs<String, Any>,
            ],
        ])
        let paths = Set(found.map(\.path))
        for expected in [
            "mqtt.url", "mqtt.qos", "mqtt.keepalive", "mqtt.colour", "http.port", "http.legacy_routes", "source.kind",
            "source.interval", "log.level", "extra", "users[0].password_hash", "users[0].rooms[1].id", "users[1].id",
            "users[1].rooms[0].sensors[1]", "users[2].id", "users[2].rooms",
        ] {
            #expect(paths.contains(expected), "no issue for \(expected) in \(found.map(\.description))")
        }
        #expect(found.first { $0.path == "mqtt.colour" }?.message == "is not a known key")
        #expect(found.first { $0.path == "users[1].rooms[0].sensors[1]" }?.message.contains("Pressure") == true)
    }

    @Test func usersAreRequiredAndUnique() {
        #expect(issues([:]).map(\.path) == ["users"])
        let duplicate = issues(["users": Fixtures.minimalUsers + Fixtures.minimalUsers])
        #expect(duplicate.map(\.path) == ["users[1].id", "users[1].username"])
    }

    @Test func adminIsAFlagOfTheUserAndOffByDefault() throws {
        func user(_ id: String, admin: Any?) -> KeyValuePairs<String, Any> {
            if let admin {
                return ["id": id, "username": "u\(id)", "password_hash": "$argon2id$v=19$x", "rooms": ["Kitchen"],
                        "admin": admin]
            }
            return ["id": id, "username": "u\(id)", "password_hash": "$argon2id$v=19$x", "rooms": ["Kitchen"]]
        }
        let config = try load(["users": [user("1", admin: "true"), user("2", admin: nil)]]).get()
        #expect(config.users.map(\.isAdmin) == [true, false])
        let bad = issues(["users": [user("1", admin: "sometimes")]])
        #expect(bad.map(\.path) == ["users[0].admin"])
        #expect(bad.first?.message.contains("sometimes") == true)
    }

    @Test func duplicatesAreFoundBesideOtherProblemsOfTheSameUserOrRoom() {
        let found = issues(["users": [
            ["id": "1", "username": "a", "password_hash": "$argon2id$x",
             "rooms": [["name": "Attic", "sensors": ["Pressure", "Lights", "Lights"]] as KeyValuePairs<String, Any>,
                       ["name": "attic", "sensors": ["Wind"]] as KeyValuePairs<String, Any>]]
                as KeyValuePairs<String, Any>,
            ["id": "1", "username": "a", "password_hash": "plain", "rooms": ["Kitchen"]] as KeyValuePairs<String, Any>,
        ]])
        #expect(Set(found.map(\.path)) == [
            "users[0].rooms[0].sensors[0]", "users[0].rooms[0].sensors[2]", "users[0].rooms[1].sensors[0]",
            "users[0].rooms[1].id", "users[1].password_hash", "users[1].id", "users[1].username",
        ], "\(found.map(\.description))")
    }

    @Test func reservedTopicLevelsAreRefused() {
        let found = issues(["users": [
            ["id": "bridge", "username": "a", "password_hash": "$argon2id$x", "rooms": ["Events"]]
                as KeyValuePairs<String, Any>,
        ]])
        #expect(Set(found.map(\.path)) == ["users[0].id", "users[0].rooms[0].name"])
    }

    @Test func brokerURLs() throws {
        #expect(try BrokerURL.parse("mqtt://localhost").get() == BrokerURL(host: "localhost", port: 1883, tls: false))
        #expect(try BrokerURL.parse("mqtts://h:8884").get() == BrokerURL(host: "h", port: 8884, tls: true))
        #expect(try BrokerURL.parse("mqtt://[::1]:1999").get() == BrokerURL(host: "::1", port: 1999, tls: false))
        #expect(try BrokerURL.parse("mqtts://example").get().port == 8883)
        #expect(try BrokerURL.parse("mqtt://user@h").get() == BrokerURL(host: "h", port: 1883, tls: false, username: "user"))
        for bad in ["tcp://h", "mqtt://", "mqtt://h:0", "mqtt://h:x", "mqtt://[::1", "mqtt://@h"] {
            #expect((try? BrokerURL.parse(bad).get()) == nil, "\(bad) accepted")
        }
    }

    @Test func durations() {
        #expect(ConfigValue.parseDuration("30") == 30)
        #expect(ConfigValue.parseDuration("0.5") == 0.5)
        #expect(ConfigValue.parseDuration("500ms") == 0.5)
        #expect(ConfigValue.parseDuration("5m") == 300)
        #expect(ConfigValue.parseDuration("2h") == 7200)
        #expect(ConfigValue.parseDuration("30d") == 2_592_000)
        #expect(ConfigValue.parseDuration("-1") == nil)
        #expect(ConfigValue.parseDuration("soon") == nil)
    }

    /// Every key README calls a duration or seconds takes the same forms.
    @Test(arguments: [
        ("mqtt.keepalive", "45"), ("mqtt.keepalive", "45s"), ("mqtt.keepalive", "2m"), ("mqtt.reconnect_min", "500ms"),
        ("mqtt.reconnect_max", "2m"), ("http.connection_timeout", "1m"), ("http.session_ttl", "12h"),
        ("source.interval", "250ms"), ("source.timeout", "2s"), ("source.max_backoff", "1h"), ("publish.refresh", "1d"),
        ("scheduler.grace", "90s"), ("cluster.command_timeout", "1500ms"), ("cluster.mirror_idle", "5m"),
    ])
    func durationKeysTakeUnits(path: String, text: String) throws {
        let seconds = try #require(ConfigValue.parseDuration(text))
        let config = try load(["users": Fixtures.minimalUsers], environment: [ConfigLoader.environmentName(of: path): text])
            .get()
        let decoded: [String: Double] = [
            "mqtt.keepalive": Double(config.mqtt.keepalive), "mqtt.reconnect_min": config.mqtt.reconnectMin,
            "mqtt.reconnect_max": config.mqtt.reconnectMax, "http.connection_timeout": config.http.connectionTimeout,
            "http.session_ttl": config.http.sessionTTL, "source.interval": config.source.interval,
            "source.timeout": config.source.timeout, "source.max_backoff": config.source.maxBackoff,
            "publish.refresh": config.publish.refresh, "scheduler.grace": config.scheduler.grace,
            "cluster.command_timeout": config.cluster.commandTimeout, "cluster.mirror_idle": config.cluster.mirrorIdle,
        ]
        #expect(decoded[path] == seconds, "\(path): \(text)")
    }

    /// MQTT's keepalive is whole seconds on the wire: a fraction is refused, not rounded.
    @Test func keepaliveRefusesFractionsOfASecond() {
        for text in ["1.5", "1500ms", "30.5s", "4s", "soon"] {
            let found = issues(["mqtt": ["keepalive": text] as KeyValuePairs<String, Any>, "users": Fixtures.minimalUsers])
            #expect(found.map(\.path) == ["mqtt.keepalive"], "\(text)")
            #expect(found.first?.message.contains("whole number of seconds") == true, "\(found)")
        }
    }
}
