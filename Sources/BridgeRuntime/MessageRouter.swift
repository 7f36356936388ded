import BridgeMQTT
import Synchronization

/// Routes each received message to every feature with a subscription that matches its topic
/// (libmosquitto's own matching), so no feature sees another's messages and the order of the
/// feature list decides nothing. Features that subscribe while running (the cluster's mirrors)
/// do it here, so their routes and their broker subscriptions stay one list.
final class MessageRouter: Sendable {
    /// Exact topics (most of a cluster's mirror subscriptions: thousands) by topic, the few
    /// wildcard filters in a list, so routing costs a lookup plus a match per wildcard filter.
    private struct Routes {
        var exact: [String: [any BridgeFeature]] = [:]
        var wildcard: [(filter: String, feature: any BridgeFeature)] = []

        func features(for filter: String) -> [any BridgeFeature] {
            isWildcard(filter) ? wildcard.filter { $0.filter == filter }.map(\.feature) : exact[filter] ?? []
        }

        mutating func add(_ filter: String, _ feature: any BridgeFeature) {
            guard !features(for: filter).contains(where: { $0.name == feature.name }) else { return }
            if isWildcard(filter) { wildcard.append((filter, feature)) } else { exact[filter, default: []].append(feature) }
        }

        mutating func remove(_ filter: String, _ feature: any BridgeFeature) {
            if isWildcard(filter) {
                wildcard.removeAll { $0.filter == filter && $0.feature.name == feature.name }
            } else {
                exact[filter]?.removeAll { $0.name == feature.name }
                if exact[filter]?.isEmpty == true { exact[filter] = nil }
            }
        }

        private func isWildcard(_ filter: String) -> Bool { MQTTTopicFilter.isWildcard(filter) }
    }

    private let broker: any BrokerLink
    private let logger: Logger
    private let routes = Mutex(Routes())
    /// Filters unsubscribed and not subscribed again, the newest last, at most `unsubscribedLimit`:
    /// the broker may still deliver what it had sent on one before it took the unsubscribe (the
    /// discovery sweep's retained configs still arriving, a device's or a mirrored user's last
    /// readings), which is dropped without calling it unexpected.
    private let unsubscribed = Mutex(RecentFilters())
    static let unsubscribedLimit = 4096

    /// How many unsubscribed filters are kept (at most `unsubscribedLimit`).
    var unsubscribedCount: Int { unsubscribed.withLock { $0.order.count } }

    private struct RecentFilters {
        var exact: Set<String> = []
        var wildcard: [String] = []
        var order: [String] = []

        mutating func insert(_ filter: String) {
            guard !contains(filter) else { return }
            order.append(filter)
            if MQTTTopicFilter.isWildcard(filter) { wildcard.append(filter) } else { exact.insert(filter) }
            if order.count > MessageRouter.unsubscribedLimit { remove(order[0]) }
        }

        mutating func remove(_ filter: String) {
            guard contains(filter) else { return }
            order.removeAll { $0 == filter }
            wildcard.removeAll { $0 == filter }
            exact.remove(filter)
        }

        func contains(_ filter: String) -> Bool { exact.contains(filter) || wildcard.contains(filter) }

        func matches(_ topic: String) -> Bool {
            exact.contains(topic) || wildcard.contains { MQTTTopicFilter.matches($0, topic: topic) }
        }
    }

    init(broker: any BrokerLink, logger: Logger) {
        self.broker = broker
        self.logger = logger
    }

    /// Subscribes a feature's declared subscriptions.
    func add(_ feature: any BridgeFeature) throws(MQTTError) {
        for subscription in feature.subscriptions {
            try subscribe(subscription.filter, qos: subscription.qos, for: feature)
        }
    }

    /// Subscribes `filter` now (and after every reconnect) and routes what matches it to `feature`.
    func subscribe(_ filter: String, qos: Int, for feature: any BridgeFeature) throws(MQTTError) {
        routes.withLock { $0.add(filter, feature) }
        unsubscribed.withLock { $0.remove(filter) }
        try broker.subscribe(filter, qos: qos)
    }

    /// Stops routing `filter` to `feature`; unsubscribes when no other feature wants it.
    func unsubscribe(_ filter: String, for feature: any BridgeFeature) {
        let unused = routes.withLock { routes -> Bool in
            routes.remove(filter, feature)
            return routes.features(for: filter).isEmpty
        }
        guard unused else { return }
        unsubscribed.withLock { $0.insert(filter) }
        try? broker.unsubscribe(filter)
    }

    /// Hands a message to each feature whose filter matches it; logs one that nobody wants (the
    /// broker sent something no subscription asked for).
    func route(_ message: MQTTMessage) {
        let targets = routes.withLock { routes -> [any BridgeFeature] in
            var targets = routes.exact[message.topic] ?? []
            for (filter, feature) in routes.wildcard where MQTTTopicFilter.matches(filter, topic: message.topic)
                && !targets.contains(where: { $0.name == feature.name }) {
                targets.append(feature)
            }
            return targets
        }
        guard !targets.isEmpty else {
            if unsubscribed.withLock({ $0.matches(message.topic) }) {
                logger.debug("dropped a message sent before its unsubscribe", ["topic": message.topic])
            } else {
                logger.warning("ignored message on an unexpected topic", ["topic": message.topic])
            }
            return
        }
        if logger.minimumLevel <= .debug {
            logger.debug("message", ["topic": message.topic, "bytes": String(message.payload.count),
                                     "retain": String(message.retain), "to": targets.map(\.name).joined(separator: ",")])
        }
        for feature in targets { feature.handle(message) }
    }
}
