/// How an `MQTTClient` connects: broker, identity, last will and reconnect policy.
public struct MQTTConfiguration: Sendable {
    /// A message the broker publishes for the client when it goes away without disconnecting.
    public struct Will: Sendable {
        public var topic: String
        public var payload: [UInt8]
        public var qos: Int
        public var retain: Bool

        public init(topic: String, payload: [UInt8], qos: Int, retain: Bool) {
            self.topic = topic
            self.payload = payload
            self.qos = qos
            self.retain = retain
        }
    }

    /// TLS to the broker: the CA that signed the broker's certificate (`nil`: the system's CAs in
    /// `/etc/ssl/certs`), and an optional client certificate.
    public struct TLS: Sendable {
        public var caFile: String?
        public var certFile: String?
        public var keyFile: String?
        public var verifyHostname: Bool

        public init(caFile: String?, certFile: String? = nil, keyFile: String? = nil, verifyHostname: Bool = true) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
            self.verifyHostname = verifyHostname
        }
    }

    public var host: String
    public var port: Int
    public var clientID: String
    public var username: String?
    public var password: String?
    /// Seconds between keepalive pings; libmosquitto needs at least 5. A connection from which
    /// nothing has come for 1.5 × keepalive is taken as dead and closed.
    public var keepalive: Int
    public var will: Will?
    public var tls: TLS?
    /// Seconds before the first reconnect attempt; doubles with every failed attempt up to
    /// `reconnectMax` (with up to 20 % jitter taken off; see `ReconnectBackoff`).
    public var reconnectMin: Double
    public var reconnectMax: Double
    /// QoS 1/2 messages handed to libmosquitto and not yet acknowledged, at most; more wait in the
    /// client's own queue (0 = no limit).
    public var maxInflight: Int
    /// QoS 1/2 messages kept while the broker is away (and while `maxInflight` are unacknowledged),
    /// at most; beyond it the oldest superseded retained messages, then the oldest, are dropped.
    public var maxQueued: Int
    /// `false`: a persistent session, so QoS 1 messages for this client that arrive while it is
    /// reconnecting are kept by the broker and delivered when it is back. The first connection of
    /// each client object still starts afresh (a previous run's session and anything queued in it
    /// is discarded).
    public var cleanSession: Bool
    /// Told about things worth a log line (see `MQTTNotice`), on the network thread.
    public var onNotice: (@Sendable (MQTTNotice) -> Void)?

    public init(
        host: String,
        port: Int,
        clientID: String,
        username: String? = nil,
        password: String? = nil,
        keepalive: Int = 30,
        will: Will? = nil,
        tls: TLS? = nil,
        reconnectMin: Double = 1,
        reconnectMax: Double = 60,
        maxInflight: Int = 100,
        maxQueued: Int = 10_000,
        cleanSession: Bool = true,
        onNotice: (@Sendable (MQTTNotice) -> Void)? = nil
    ) {
        self.host = host
        self.port = port
        self.clientID = clientID
        self.username = username
        self.password = password
        self.keepalive = keepalive
        self.will = will
        self.tls = tls
        self.reconnectMin = reconnectMin
        self.reconnectMax = reconnectMax
        self.maxInflight = maxInflight
        self.maxQueued = maxQueued
        self.cleanSession = cleanSession
        self.onNotice = onNotice
    }
}
