/// A message received on a subscription.
public struct MQTTMessage: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    /// The packet id (0 for QoS 0), used to recognise a redelivered QoS 1 message.
    public var messageID: Int

    public init(topic: String, payload: [UInt8], qos: Int = 0, retain: Bool = false, messageID: Int = 0) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.messageID = messageID
    }

    /// The payload as text (invalid UTF-8 repaired), for logs.
    public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// What happens on the connection, in order, as seen from libmosquitto's network thread.
public enum MQTTEvent: Sendable {
    /// The broker accepted the connection (also after every automatic reconnect).
    case connected
    /// The broker refused the connection; `reason` is libmosquitto's CONNACK text
    /// (e.g. "Connection Refused: not authorised.").
    case refused(reason: String)
    /// The connection was lost (`unexpected` true) or closed by `disconnect()`.
    case disconnected(unexpected: Bool, reason: String)
    case message(MQTTMessage)
}
