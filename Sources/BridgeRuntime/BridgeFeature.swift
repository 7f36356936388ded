import BridgeMQTT

/// A subscription a feature declares: the broker delivers what matches `filter` at up to `qos`,
/// and the bridge routes each message to every feature whose filter it matches.
struct MQTTSubscription: Sendable, Equatable {
    var filter: String
    var qos: Int
}

/// One part of the running bridge, in the shape of zigbee2mqtt's extensions and
/// swift-service-lifecycle's services (docs/architecture.md): it declares its MQTT subscriptions
/// beside the handler for them, hears about every (re)connection, and does its long-running work
/// in `run()`, which the bridge runs in its one task group and which ends when that task is
/// cancelled. `shutdown()` runs after every `run()` has ended, in the reverse order of the
/// bridge's feature list. Every requirement has a default that does nothing.
protocol BridgeFeature: Sendable {
    /// A name for logs and the topic → feature table (docs/architecture.md).
    var name: String { get }
    /// Subscribed before the first connection and again after every reconnect.
    var subscriptions: [MQTTSubscription] { get }
    /// A message on one of this feature's subscriptions (static or made through the router),
    /// on the bridge's MQTT event loop: must not block.
    func handle(_ message: MQTTMessage)
    /// The broker accepted a connection (the first or a reconnect); must not block.
    func connected()
    /// Long-running work, until the task is cancelled.
    func run() async
    /// After every `run()` has ended: last words (the `offline` state, a final flush).
    func shutdown() async
}

extension BridgeFeature {
    var subscriptions: [MQTTSubscription] { [] }
    func handle(_ message: MQTTMessage) {}
    func connected() {}
    func run() async {}
    func shutdown() async {}
}
