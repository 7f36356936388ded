import BridgeMQTT

/// Publishing for every feature: at `mqtt.qos`, retained unless said otherwise, and a failure
/// (a QoS 0 publish while disconnected) logged at debug level, since what matters goes out again
/// on reconnect anyway.
struct Outbound: Sendable {
    let broker: any BrokerLink
    let qos: Int
    let logger: Logger

    /// - Parameter qos: overrides `mqtt.qos` (the `offline` state always goes at QoS 1).
    func send(_ topic: String, _ payload: String, retain: Bool = true, qos: Int? = nil) {
        send(topic, bytes: Array(payload.utf8), retain: retain, qos: qos)
    }

    func send(_ topic: String, bytes payload: [UInt8], retain: Bool = true, qos: Int? = nil) {
        do {
            _ = try broker.publish(topic: topic, payload: payload, qos: qos ?? self.qos, retain: retain)
        } catch {
            logger.debug("publish failed", ["topic": topic, "error": error.description])
        }
    }
}
