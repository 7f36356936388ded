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
    /// Seconds between keepalive pings; libmosquitto needs at least 5.
    public var keepalive: Int
    public var will: Will?
    public var tls: TLS?
    /// Seconds before the first reconnect attempt; doubles up to `reconnectMax`.
    public var reconnectMin: Int
    public var reconnectMax: Int
    /// QoS 1/2 messages in flight at once; more are queued by libmosquitto (0 = no limit).
    public var maxInflight: Int

    public init(
        host: String,
        port: Int,
        clientID: String,
        username: String? = nil,
        password: String? = nil,
        keepalive: Int = 30,
        will: Will? = nil,
        tls: TLS? = nil,
        reconnectMin: Int = 1,
        reconnectMax: Int = 60,
        maxInflight: Int = 100
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
    }
}
