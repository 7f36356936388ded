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

    /// What the broker sent on a filter before it took the unsubscribe (the discovery sweep's
    /// retained configs still arriving after its window) is dropped quietly; a topic nobody ever
    /// subscribed to is still called unexpected, and so is the filter's again once subscribed
    /// and released by nobody.
    @Test func messagesOnAnUnsubscribedFilterAreNotCalledUnexpected() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("router-\(UUID().uuidString).log").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        let router = MessageRouter(broker: MemoryBroker(), logger: Logger(level: .info, output: LogOutput(handle: handle)))
        let sweep = Listener("homeassistant", ["homeassistant/+/+/+/config"])
        let mirror = Listener("mirror", [])
        try router.add(sweep)
        try router.subscribe("smarthome/2/kitchen/temperature", qos: 0, for: mirror)
        router.unsubscribe("homeassistant/+/+/+/config", for: sweep)
        router.unsubscribe("smarthome/2/kitchen/temperature", for: mirror)
        router.route(Self.message("homeassistant/sensor/smarthome_86_bedroom/temperature/config"))
        router.route(Self.message("smarthome/2/kitchen/temperature"))
        func unexpected() throws -> [String] {
            try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
                .filter { $0.contains("unexpected topic") }.map(String.init)
        }
        #expect(try unexpected().isEmpty)
        #expect(sweep.topics.isEmpty && mirror.topics.isEmpty)
        router.route(Self.message("other/topic"))
        #expect(try unexpected().count == 1)
        // Subscribed again, the filter's messages are routed; nothing is left over of the release.
        try router.subscribe("smarthome/2/kitchen/temperature", qos: 0, for: mirror)
        router.route(Self.message("smarthome/2/kitchen/temperature"))
        #expect(mirror.topics == ["smarthome/2/kitchen/temperature"])
    }

    @Test func theUnsubscribedFiltersKeptAreBounded() throws {
        let router = MessageRouter(broker: MemoryBroker(), logger: Logger(level: .error))
        let mirror = Listener("mirror", [])
        for index in 0...MessageRouter.unsubscribedLimit {
            try router.subscribe("smarthome/\(index)/kitchen/temperature", qos: 0, for: mirror)
            router.unsubscribe("smarthome/\(index)/kitchen/temperature", for: mirror)
        }
        #expect(router.unsubscribedCount == MessageRouter.unsubscribedLimit)
    }
}

