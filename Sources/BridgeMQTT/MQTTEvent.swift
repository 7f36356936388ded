/// A message received on a subscription.
public struct MQTTMessage: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    /// The packet id (0 for QoS 0), used to recognise a redelivered QoS 1 message.
    public var messageID: Int
    /// The broker sent this message again after a reconnect (same packet id, resumed session):
    /// it was already delivered once on the previous connection.
    public var isRedelivery: Bool

    public init(topic: String, payload: [UInt8], qos: Int = 0, retain: Bool = false, messageID: Int = 0,
                isRedelivery: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.messageID = messageID
        self.isRedelivery = isRedelivery
    }

    /// The payload as text (invalid UTF-8 repaired), for logs.
    public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// What happens on the connection, in order, as seen from the client's network thread.
public enum MQTTEvent: Sendable {
    /// The broker accepted the connection (also after every automatic reconnect).
    case connected
    /// The broker refused the connection; `reason` is libmosquitto's CONNACK text
    /// (e.g. "Connection Refused: not authorised.").
    case refused(reason: String)
    /// The connection was lost, or a connection attempt failed (`unexpected` true; one event per
    /// attempt), or the client was stopped (`unexpected` false).
    case disconnected(unexpected: Bool, reason: String)
    case message(MQTTMessage)
}

/// Things about the connection worth a log line that are not events of their own: reported
/// through `MQTTConfiguration.onNotice`, on the client's network thread.
public enum MQTTNotice: Sendable, Equatable {
    /// The offline queue reached `maxQueued` while the broker was away: from now on the oldest
    /// superseded messages (then the oldest) are dropped. Reported once per outage.
    case queueFull(capacity: Int)
    /// Connected again: `queued` messages that waited are going out now; `dropped` were dropped
    /// while the broker was away (`droppedTotal` since start).
    case queueFlushed(queued: Int, dropped: Int, droppedTotal: Int)
    /// Nothing came from the broker for `silence` seconds (more than 1.5 × `keepalive`): the
    /// connection is taken as dead and closed.
    case deadConnection(silence: Double, keepalive: Int)
    /// The broker took the TCP connection but did not answer CONNECT within `seconds`.
    case noConnack(seconds: Double)
}
