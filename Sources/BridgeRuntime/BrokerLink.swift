import BridgeMQTT

/// What the runtime needs of its MQTT connection. `MQTTClient` is the real one; tests give the
/// features an in-memory broker instead, so the rules of each feature are tested without a
/// broker too (docs/architecture.md, "Test seams").
protocol BrokerLink: Sendable {
    /// Everything that happens on the connection, in order; meant for one consumer (`Bridge`).
    var events: AsyncStream<MQTTEvent> { get }
    var isConnected: Bool { get }
    var lastProblem: String? { get }
    var queuedMessages: Int { get }
    var droppedMessages: Int { get }
    var failedAttempts: Int { get }
    var nextAttemptDelay: Double? { get }

    func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(MQTTError) -> Int32
    func subscribe(_ filter: String, qos: Int) throws(MQTTError)
    func unsubscribe(_ filter: String) throws(MQTTError)
    /// Waits while the backlog of unsent messages is at `limit` or more (while connected).
    func waitForBacklog(below limit: Int) async
    /// Waits until everything published so far went out, or `timeout` seconds pass.
    func waitForPublished(timeout: Double) async -> Bool
}

extension MQTTClient: BrokerLink {}
