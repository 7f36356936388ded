import BridgeMQTT
import Foundation
import Synchronization
import Testing
@testable import BridgeRuntime

/// Routing by topic filter (libmosquitto's matching): each feature gets what its subscriptions
/// match, and only that.
@Suite struct MessageRouterTests {
    final class Listener: BridgeFeature {
        let name: String
        let subscriptions: [MQTTSubscription]
        private let received = Mutex<[String]>([])

        init(_ name: String, _ filters: [String]) {
            self.name = name
            subscriptions = filters.map { MQTTSubscription(filter: $0, qos: 0) }
        }

        func handle(_ message: MQTTMessage) { received.withLock { $0.append(message.topic) } }
        var topics: [String] { received.withLock { $0 } }
    }

    static func message(_ topic: String) -> MQTTMessage { MQTTMessage(topic: topic, payload: Array("x".utf8)) }

    @Test func eachFeatureGetsWhatItsFiltersMatch() throws {
        let broker = MemoryBroker()
        let router = MessageRouter(broker: broker, logger: Logger(level: .error))
        let commands = Listener("commands", ["smarthome/+/+/+/set"])
        let everything = Listener("everything", ["smarthome/#"])
        let exact = Listener("exact", ["smarthome/1/kitchen/lights"])
        for feature in [commands, everything, exact] { try router.add(feature) }
        #expect(broker.subscriptions == ["smarthome/+/+/+/set", "smarthome/#", "smarthome/1/kitchen/lights"])

        for topic in ["smarthome/1/kitchen/lights/set", "smarthome/1/kitchen/lights", "other/topic"] {
            router.route(Self.message(topic))
        }
        #expect(commands.topics == ["smarthome/1/kitchen/lights/set"])
        #expect(everything.topics == ["smarthome/1/kitchen/lights/set", "smarthome/1/kitchen/lights"])
        #expect(exact.topics == ["smarthome/1/kitchen/lights"])
    }

    @Test func aDynamicSubscriptionRoutesUntilReleased() throws {
        let broker = MemoryBroker()
        let router = MessageRouter(broker: broker, logger: Logger(level: .error))
        let mirror = Listener("mirror", [])
        try router.subscribe("smarthome/2/kitchen/lights", qos: 0, for: mirror)
        router.route(Self.message("smarthome/2/kitchen/lights"))
        router.unsubscribe("smarthome/2/kitchen/lights", for: mirror)
        router.route(Self.message("smarthome/2/kitchen/lights"))
        #expect(mirror.topics == ["smarthome/2/kitchen/lights"])
        #expect(broker.subscriptions.isEmpty)
    }
}
