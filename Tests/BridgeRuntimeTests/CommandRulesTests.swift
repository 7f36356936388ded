import BridgeCore
import BridgeMQTT
import Foundation
import Testing
@testable import BridgeRuntime

/// The command path's rules (README, "MQTT"), without a broker.
@Suite struct CommandRulesTests {
    static func command(_ payload: String, user: String = "1", room: String = "kitchen", sensor: String = "lights",
                        retain: Bool = false, redelivery: Bool = false) -> MQTTMessage {
        MQTTMessage(topic: "smarthome/\(user)/\(room)/\(sensor)/set", payload: Array(payload.utf8), qos: 1,
                    retain: retain, messageID: 7, isRedelivery: redelivery)
    }

    @Test func aCommandPublishesTheLightAndTheRoom() throws {
        let bridge = RuntimeFixture()
        bridge.commands.handle(Self.command("ON"))
        let published = bridge.broker.take()
        #expect(published.first == .init(topic: "smarthome/1/kitchen/lights", payload: "ON", retain: true))
        let room = try #require(published.first { $0.topic == "smarthome/1/kitchen" })
        #expect(room.payload.contains(#""On""#))
        #expect(bridge.store.home.value(of: .lights, in: RoomKey(user: "1", room: "kitchen")) == .binary(true))
    }

    @Test func togglesCountExactly() {
        let bridge = RuntimeFixture()
        var states: [String] = []
        for _ in 0..<3 {
            bridge.commands.handle(Self.command("TOGGLE"))
            states += bridge.broker.take().filter { $0.topic == "smarthome/1/kitchen/lights" }.map(\.payload)
        }
        #expect(states == ["ON", "OFF", "ON"])
    }

    @Test func retainedAndClearedCommandsChangeNothing() {
        let bridge = RuntimeFixture()
        bridge.commands.handle(Self.command("ON", retain: true))
        bridge.commands.handle(Self.command(""))
        #expect(bridge.broker.take().isEmpty)
        #expect(bridge.store.home.value(of: .lights, in: RoomKey(user: "1", room: "kitchen")) == nil)
    }

    @Test func aRedeliveredToggleIsNotAppliedTwiceButARedeliveredOnIs() {
        let bridge = RuntimeFixture()
        bridge.commands.handle(Self.command("TOGGLE", redelivery: true))
        #expect(bridge.broker.take().isEmpty)
        bridge.commands.handle(Self.command("ON", redelivery: true))
        #expect(bridge.broker.take().contains { $0.topic == "smarthome/1/kitchen/lights" && $0.payload == "ON" })
    }

    @Test(arguments: [
        ("ON", "1", "attic", "lights", "unknown_room"),
        ("ON", "1", "kitchen", "temperature", "not_a_light"),
        ("ON", "1", "garden", "lights", "no_lights"),
        ("DIM", "1", "kitchen", "lights", "bad_payload"),
    ])
    func aBadCommandIsOneRejectionEvent(payload: String, user: String, room: String, sensor: String, reason: String) {
        let bridge = RuntimeFixture()
        bridge.commands.handle(Self.command(payload, user: user, room: room, sensor: sensor))
        let published = bridge.broker.take()
        #expect(published.count == 1)
        #expect(published.first?.topic == "smarthome/1/events")
        #expect(published.first?.retain == false)
        #expect(published.first?.payload.contains(#""reason":"\#(reason)""#) == true, "\(published)")
    }

    @Test func anUnknownUserIsOnlyLogged() {
        let bridge = RuntimeFixture()
        bridge.commands.handle(Self.command("ON", user: "9"))
        #expect(bridge.broker.take().isEmpty)
    }

    @Test func anotherInstancesUserIsLeftToItsOwner() {
        let owner = ClusterMembership(instances: 2, index: 0).owner(of: "1")
        let bridge = RuntimeFixture(instances: 2, index: 1 - owner)
        bridge.commands.handle(Self.command("ON"))
        #expect(bridge.broker.take().isEmpty)
    }

    /// Runs a blocking call on a thread of its own, as libmicrohttpd's threads make it (blocking a
    /// thread of Swift's cooperative pool could starve the task that answers it).
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }

    @Test func anAPICommandWaitsForTheLightSwitch() async {
        let lamp = RecordingSwitch(answer: .success(.accepted))
        let bridge = RuntimeFixture(lights: lamp)
        let task = Task { await bridge.commands.run() }
        defer { task.cancel() }
        let commands = bridge.commands
        let outcome = await Self.onThread { commands.switchAndWait(.on, user: "1", room: "Kitchen") }
        #expect(outcome == .success(Reading(user: "1", room: "kitchen", sensor: .lights, value: .binary(true))))
        #expect(lamp.calls == [true])
        #expect(bridge.broker.take().contains { $0.topic == "smarthome/1/kitchen/lights" && $0.payload == "ON" })
    }

    @Test func aRefusedSwitchChangesNothing() async {
        let lamp = RecordingSwitch(answer: .failure(.upstream(status: 503, detail: "busy")))
        let bridge = RuntimeFixture(lights: lamp)
        let task = Task { await bridge.commands.run() }
        defer { task.cancel() }
        let commands = bridge.commands
        let outcome = await Self.onThread { commands.switchAndWait(.toggle, user: "1", room: "kitchen") }
        #expect(outcome == .failure(.upstream(status: 503, detail: "busy")))
        #expect(lamp.calls == [true])
        let published = bridge.broker.take()
        #expect(published.map(\.topic) == ["smarthome/1/events"])
        #expect(bridge.store.home.value(of: .lights, in: RoomKey(user: "1", room: "kitchen")) == nil)
    }
}

/// A light switch that answers as told and remembers what it was asked.
final class RecordingSwitch: LightSwitch, @unchecked Sendable {
    // @unchecked: `calls` is guarded by `lock`.
    private let lock = NSLock()
    private var asked: [Bool] = []
    let answer: Result<SwitchOutcome, CommandRejection>

    init(answer: Result<SwitchOutcome, CommandRejection>) {
        self.answer = answer
    }

    var calls: [Bool] { lock.withLock { asked } }

    func switchLight(_ target: CommandTarget, on: Bool) async -> Result<SwitchOutcome, CommandRejection> {
        lock.withLock { asked.append(on) }
        return answer
    }
}
