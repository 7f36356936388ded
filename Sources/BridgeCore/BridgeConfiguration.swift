/// Everything the bridge reads from its config file and `SMARTHOME_*` environment variables
/// (README "Configuration"). Every key has a default except `users`.
///
/// `ConfigKey.all` decodes each key into one of these fields; a key is accepted only with a decoder.
public struct BridgeConfiguration: Sendable {
    public struct MQTT: Sendable {
        /// `nil`: start the embedded broker.
        public var url: BrokerURL? = nil
        /// The port the embedded broker tries first (0: any free port).
        public var embeddedPort = 1883
        public var baseTopic = "smarthome"
        /// `nil`: the running bridge sets `defaultClientID(installID:)` (README, "MQTT", client ids);
        /// `effectiveClientID` is then `smarthome-bridge-<base topic>`.
        public var clientID: String? = nil
        public var username: String? = nil
        public var password: String? = nil
        public var passwordFile: String? = nil
        public var qos = 1
        public var keepalive = 30
        public var reconnectMin = 1.0
        public var reconnectMax = 60.0
        public var maxQueued = 10_000
        public var tlsCA: String? = nil
        public var tlsCert: String? = nil
        public var tlsKey: String? = nil
        public var tlsVerify = true

        public var effectiveClientID: String { clientID ?? "smarthome-bridge-\(baseTopic.replacing("/", with: "-"))" }

        /// The default client id of one installation: `smarthome-bridge-<base topic>-<install id>`, the
        /// install id being random and kept in the database. Two bridges with different base topics
        /// still differ, and no other client can work the id out from the base topic and take the
        /// bridge's connection over by connecting with it.
        public func defaultClientID(installID: String) -> String {
            "smarthome-bridge-\(baseTopic.replacing("/", with: "-"))-\(installID)"
        }
    }

    public struct HTTP: Sendable {
        public var bind = "127.0.0.1"
        public var port = 8080
        public var legacyRoutes = false
        public var sessionTTL = 30 * 86_400.0
        public var maxConnections = 256
        public var maxConnectionsPerAddress = 64
        public var connectionTimeout = 30.0
        /// Seconds for a whole request head (README "HTTP", "Connection limits").
        public var requestHeadTimeout = 10.0
        /// Event streams one token, and one user, may hold at once (README "Live events").
        public var maxStreamsPerToken = 8
        public var maxStreamsPerUser = 16
        public var maxHeaderBytes = 16 * 1024
        public var maxBodyBytes = 64 * 1024
        public var threads = 4
        /// The folder the web dashboard is served from.
        public var webRoot = "web"
        /// PEM files: with both set, every route is served over TLS on `port` (README "HTTPS").
        public var tlsCert: String? = nil
        public var tlsKey: String? = nil
        /// Comma-separated `Host` names answered (`*`: any); `nil`: loopback names and the bind address
        /// (README "Host names").
        public var allowedHosts: String? = nil
        /// Comma-separated proxy addresses whose `X-Forwarded-For` is believed (README "Security model").
        public var trustedProxies: String? = nil

        /// `trustedProxies` as a set of addresses.
        public var trustedProxySet: Set<String> {
            Set((trustedProxies ?? "").split(separator: ",").map { $0.filter { $0 != " " } }.filter { !$0.isEmpty })
        }

        /// When set, `/metrics` answers only `Authorization: Bearer <this>` (README, "Prometheus").
        public var metricsToken: String? = nil
    }

    public struct LightsCommand: Sendable {
        public var method = "POST"
        public var path: String? = nil
        public var body: String? = nil
    }

    public struct Source: Sendable {
        public enum Kind: String, Sendable, CaseIterable {
            case simulated
            case rest
        }

        public var kind = Kind.simulated
        /// Seconds between simulation steps or polls; 0 runs the simulator as fast as it can.
        public var interval = 5.0
        /// `nil`: a random seed, logged at start so a run can be repeated.
        public var seed: UInt64? = nil
        public var baseURL: String? = nil
        public var timeout = 5.0
        public var concurrency = 8
        public var failuresBeforeOffline = 3
        public var maxBackoff = 300.0
        public var lightsCommand = LightsCommand()
    }

    public struct Publish: Sendable {
        public var refresh = 300.0
    }

    public struct Storage: Sendable {
        public var path = "./data/bridge.sqlite"
        public var retentionDays = 30
    }

    public struct HomeAssistant: Sendable {
        public var discovery = true
        public var prefix = "homeassistant"
    }

    /// Where real devices publish and how long a light may take to confirm (README, "Connect your
    /// devices").
    public struct Devices: Sendable {
        /// nil: the bridge's own broker.
        public var mqttURL: BrokerURL? = nil
        public var mqttUsername: String? = nil
        public var mqttPassword: String? = nil
        public var zigbeeBaseTopic = "zigbee2mqtt"
        public var commandTimeout = 5.0
    }

    /// Homie 5 devices beside Home Assistant discovery (README, "Homie").
    public struct Homie: Sendable {
        public var enabled = false
        public var prefix = "homie"
    }

    public struct Scheduler: Sendable {
        /// `nil`: the system's time zone.
        public var timezone: String? = nil
        public var grace = 600.0
        /// Where alarms relative to the sun are computed (both or neither; README "Alarms").
        public var latitude: Double? = nil
        public var longitude: Double? = nil

        public var location: GeoLocation? {
            guard let latitude, let longitude else { return nil }
            return GeoLocation(latitude: latitude, longitude: longitude)
        }
    }

    public struct Watchdogs: Sendable {
        /// The most watchdogs one user may have (README "Watchdogs").
        public var maxPerUser = 20
    }

    /// How notifications are delivered (README "Notifications").
    public struct Notify: Sendable {
        /// Tries per delivery, the first included.
        public var attempts = 4
        /// The wait before the first retry, doubling up to `maxBackoff`.
        public var backoff = 2.0
        public var maxBackoff = 60.0
        /// How long one request may take.
        public var timeout = 5.0
        /// Deliveries waiting; past this, new ones are dropped (and counted).
        public var maxQueued = 256
        /// Deliveries in flight at once.
        public var concurrency = 4

        public var retry: DeliveryRetry { DeliveryRetry(attempts: attempts, initial: backoff, maximum: maxBackoff) }
    }

    public struct Log: Sendable {
        public enum Level: String, Sendable, CaseIterable, Comparable {
            case debug, info, warning, error

            private var rank: Int { Level.allCases.firstIndex(of: self)! }
            public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rank < rhs.rank }
        }

        public var level = Level.info
    }

    public struct Cluster: Sendable {
        public var instances = 1
        public var index = 0
        /// Keys the session tokens of every instance (see `ConfigLoader` for its rules).
        public var secret: String? = nil
        /// How long an instance waits for the owning instance to confirm a light command it relayed.
        public var commandTimeout = 5.0
        /// How long an instance keeps following a user it does not own after the last request for it.
        public var mirrorIdle = 600.0

        public static let minimumSecretLength = 32

        public var membership: ClusterMembership { ClusterMembership(instances: instances, index: index) }
    }

    /// The same configuration with only the users this instance owns: what its source simulates
    /// or polls.
    public var owned: BridgeConfiguration {
        var copy = self
        let membership = cluster.membership
        copy.users = users.filter { membership.owns($0.id) }
        return copy
    }

    /// The MQTT client id: `mqtt.client_id` (or one derived from the base topic), with the cluster
    /// index appended when several instances run, so they never take each other's connection.
    public var clientID: String {
        cluster.instances > 1 ? "\(mqtt.effectiveClientID)-\(cluster.index)" : mqtt.effectiveClientID
    }

    public var mqtt = MQTT()
    public var http = HTTP()
    public var source = Source()
    public var publish = Publish()
    public var storage = Storage()
    public var homeAssistant = HomeAssistant()
    public var homie = Homie()
    public var scheduler = Scheduler()
    public var devices = Devices()
    public var watchdogs = Watchdogs()
    public var notify = Notify()
    public var log = Log()
    public var cluster = Cluster()
    public var users: [User] = []
    /// The file the configuration was read from, when it was (not a key: set by whoever loads it),
    /// so that answers about what only the file can change name it.
    public var file: String? = nil

    public init() {}
}

/// A broker address from `mqtt.url`: `mqtt://host:port` or `mqtts://host:port`.
public struct BrokerURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var tls: Bool

    public init(host: String, port: Int, tls: Bool) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    /// Parses `mqtt://host[:port]` (default port 1883) or `mqtts://host[:port]` (8883); IPv6 hosts in brackets.
    public static func parse(_ text: String) -> Result<BrokerURL, ConfigIssue> {
        let tls: Bool
        let rest: Substring
        if text.hasPrefix("mqtt://") {
            tls = false
            rest = text.dropFirst("mqtt://".count)
        } else if text.hasPrefix("mqtts://") {
            tls = true
            rest = text.dropFirst("mqtts://".count)
        } else {
            return .failure(ConfigIssue(path: "", message: "must start with mqtt:// or mqtts://, got \"\(text)\""))
        }
        let authority = rest.hasSuffix("/") ? rest.dropLast() : rest
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                return .failure(ConfigIssue(path: "", message: "has an unclosed [ in the host"))
            }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty {
                return .failure(ConfigIssue(path: "", message: "has text after the host: \"\(after)\""))
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        if host.isEmpty || host.contains("/") || host.contains("@") {
            return .failure(ConfigIssue(path: "", message: "needs a host name (mqtt://host:port), got \"\(text)\""))
        }
        var port = tls ? 8883 : 1883
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                return .failure(ConfigIssue(path: "", message: "has an invalid port \"\(portText)\" (1-65535)"))
            }
            port = value
        }
        return .success(BrokerURL(host: String(host), port: port, tls: tls))
    }

    public var description: String { "\(tls ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}
