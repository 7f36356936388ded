import BridgeCore
import BridgeMQTT
import Foundation
import Testing
@testable import BridgeRuntime

/// The state bus (docs/architecture.md): what the publisher sends, and what the other
/// subscribers are handed.
@Suite struct StateBusTests {
    static let kitchen = RoomKey(user: "1", room: "kitchen")

    @Test func aChangedReadingGoesOutOnceWithItsRoomAndReachesTheSubscribers() {
        let bridge = RuntimeFixture()
        let collector = Collector()
        bridge.bus.subscribe(collector)
        let reading = Reading(user: "1", room: "kitchen", sensor: .temperature, value: .number(25.5))
        bridge.controller.record([reading])
        bridge.controller.record([reading])
        let published = bridge.broker.take()
        #expect(published.map(\.topic) == ["smarthome/1/kitchen/temperature", "smarthome/1/kitchen"])
        #expect(collector.batches.count == 2)
        #expect(collector.publishedReadings.map(\.reading) == [reading])
    }

    @Test func anUnchangedValueGoesOutAgainWhenTheRefreshIsDue() {
        let bridge = RuntimeFixture(refresh: 0)
        let collector = Collector()
        bridge.bus.subscribe(collector)
        let reading = Reading(user: "1", room: "garden", sensor: .temperature, value: .number(20))
        bridge.controller.record([reading])
        bridge.controller.record([reading])
        #expect(bridge.broker.take().filter { $0.topic == "smarthome/1/garden/temperature" }.count == 2)
        #expect(collector.publishedReadings.count == 2)
    }

    @Test func gasComingAndGoingIsAnEvent() {
        let bridge = RuntimeFixture()
        bridge.controller.record([Reading(user: "1", room: "kitchen", sensor: .gas, value: .binary(true))])
        bridge.controller.record([Reading(user: "1", room: "kitchen", sensor: .gas, value: .binary(true))])
        bridge.controller.record([Reading(user: "1", room: "kitchen", sensor: .gas, value: .binary(false))])
        let events = bridge.broker.take().filter { $0.topic == "smarthome/1/events" }
        #expect(events.count == 2)
        #expect(events.first?.payload.contains(#""state":"ON""#) == true)
        #expect(events.last?.payload.contains(#""state":"OFF""#) == true)
    }

    @Test func aMirroredValueIsAppliedAndHandedOnButNeverPublished() {
        let bridge = RuntimeFixture()
        let collector = Collector()
        bridge.bus.subscribe(collector)
        bridge.controller.mirror(Reading(user: "2", room: "kitchen", sensor: .lights, value: .binary(true)))
        #expect(bridge.broker.take().isEmpty)
        #expect(bridge.store.home.value(of: .lights, in: RoomKey(user: "2", room: "kitchen")) == .binary(true))
        #expect(collector.publishedReadings.isEmpty)
        #expect(collector.batches.count == 1)
    }

    @Test func availabilityIsRetainedAndKept() {
        let bridge = RuntimeFixture()
        bridge.controller.setAvailability(Self.kitchen, online: false)
        #expect(bridge.broker.take() == [.init(topic: "smarthome/1/kitchen/availability", payload: "offline", retain: true)])
        #expect(bridge.store.withLock { $0.offline.contains(Self.kitchen) })
    }

    @Test func theRetainedStateCoversEveryOwnedRoom() async {
        let bridge = RuntimeFixture()
        bridge.controller.seed([Reading(user: "1", room: "garden", sensor: .temperature, value: .number(21))])
        await bridge.publisher.publishEverything()
        let topics = bridge.broker.take().map(\.topic)
        #expect(topics.prefix(2) == ["smarthome/bridge/state", "smarthome/bridge/info"])
        #expect(topics.contains("smarthome/1/garden/temperature"))
        #expect(topics.contains("smarthome/2/kitchen"))
    }
}

extension StateBusTests {
    @Test func aFirstNoGasIsNoNewsButAFirstGasIs() {
        let bridge = RuntimeFixture()
        bridge.controller.record([Reading(user: "1", room: "kitchen", sensor: .gas, value: .binary(false))])
        bridge.controller.record([Reading(user: "2", room: "kitchen", sensor: .gas, value: .binary(true))])
        let events = bridge.broker.take().filter { $0.topic.hasSuffix("/events") }.map(\.topic)
        #expect(events == ["smarthome/2/events"])
    }
}
