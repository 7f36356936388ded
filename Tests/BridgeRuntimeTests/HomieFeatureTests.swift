import BridgeCore
import BridgeStorage
import Foundation
import Testing
@testable import BridgeRuntime

/// The Homie feature's rules (README, "Homie"), on the in-memory broker.
@Suite struct HomieFeatureTests {
    func feature(_ bridge: RuntimeFixture) throws -> HomieFeature {
        let devices = HomieDevices(prefix: "homie", topics: Topics(base: "smarthome"), version: "0",
                                   users: bridge.configuration.users)
        let feature = try HomieFeature(configuration: bridge.configuration,
                                       brokerURL: BrokerURL(host: "127.0.0.1", port: 1, tls: false), devices: devices,
                                       store: bridge.store, broker: bridge.broker, logger: bridge.logger)
        bridge.bus.subscribe(feature)
        return feature
    }

    @Test func publishedReadingsBecomePropertyValues() throws {
        let bridge = RuntimeFixture()
        _ = try feature(bridge)
        bridge.commands.handle(CommandRulesTests.command("ON"))
        let homie = bridge.broker.take().filter { $0.topic.hasPrefix("homie/") }
        #expect(homie == [.init(topic: "homie/5/smarthome-1/kitchen/lights", payload: "true", retain: true)])
    }

    /// A sensor an upstream reports beyond the configured ones: the device is described again,
    /// inside `init` … `ready`, once.
    @Test func anExtraSensorRedescribesItsDeviceOnce() throws {
        let bridge = RuntimeFixture()
        _ = try feature(bridge)
        let co2 = SensorKind.named("CO2 level")
        bridge.controller.record([Reading(user: "1", room: "kitchen", sensor: co2, value: .text("410"))])
        let homie = bridge.broker.take().filter { $0.topic.hasPrefix("homie/") }
        #expect(homie.map(\.topic) == ["homie/5/smarthome-1/$state", "homie/5/smarthome-1/$description",
                                       "homie/5/smarthome-1/$state", "homie/5/smarthome-1/kitchen/co2-level"])
        #expect(homie.map(\.payload).first == "init")
        #expect(homie.count == 4 && homie[2].payload == "ready")
        #expect(homie.count == 4 && homie[1].payload.contains(#""co2-level":{"name":"CO2 level","datatype":"string"}"#))
        bridge.controller.record([Reading(user: "1", room: "kitchen", sensor: co2, value: .text("420"))])
        #expect(bridge.broker.take().filter { $0.topic.hasPrefix("homie/") }.map(\.topic)
            == ["homie/5/smarthome-1/kitchen/co2-level"])
    }

    /// Rooms changed while running (README, "Managing the home"): each device is described again,
    /// with the new room, inside `init` … `ready`.
    @Test func changedRoomsAreDescribedAgain() async throws {
        let bridge = RuntimeFixture()
        let homie = try feature(bridge)
        let running = Task { await homie.run() }
        defer { running.cancel() }
        var users = bridge.store.home.users
        users[0].rooms.append(Room(id: "office", name: "Office", sensors: [.temperature]))
        bridge.store.withLock { $0.home.setUsers(users) }
        _ = bridge.broker.take()
        homie.roomsChanged()
        var sent: [MemoryBroker.Published] = []
        for _ in 0..<200 where !sent.contains(where: { $0.topic == "homie/5/smarthome-2/$state" && $0.payload == "ready" }) {
            try await Task.sleep(for: .milliseconds(10))
            sent += bridge.broker.take().filter { $0.topic.hasPrefix("homie/5/smarthome-") }
        }
        let first = sent.filter { $0.topic.hasPrefix("homie/5/smarthome-1/") }
        #expect(first.first?.payload == "init")
        #expect(first.first { $0.topic == "homie/5/smarthome-1/$description" }?.payload.contains(#""office""#) == true)
        #expect(first.last { $0.topic == "homie/5/smarthome-1/$state" }?.payload == "ready")
    }

    /// By lease (docs/scaling.md, "Leases") the devices follow the lease, not the hash owner: a user
    /// taken over has its device published (`init`, description, values, `ready`) by the taker, and
    /// one never held is not published at all.
    @Test func devicesFollowTheLeaseNotTheHashOwner() async throws {
        let bridge = RuntimeFixture(instances: 2, index: 0)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("homie-lease-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = try Database(path: folder.appendingPathComponent("bridge.sqlite").path)
        let ownership = Ownership(membership: bridge.configuration.cluster.membership, leases: LeaseStore(database: database))
        let devices = HomieDevices(prefix: "homie", topics: Topics(base: "smarthome"), version: "0",
                                   users: bridge.configuration.users, instance: 0)
        let homie = try HomieFeature(configuration: bridge.configuration,
                                     brokerURL: BrokerURL(host: "127.0.0.1", port: 1, tls: false), devices: devices,
                                     store: bridge.store, broker: bridge.broker, ownership: ownership, logger: bridge.logger)
        ownership.onChange { homie.ownershipChanged($0) }
        let running = Task { await homie.run() }
        defer { running.cancel() }
        // Instance 0 holds the lease of the user it does not own by hash, and only that one.
        let membership = bridge.configuration.cluster.membership
        let held = try #require(["1", "2"].first { !membership.owns($0) })
        let other = held == "1" ? "2" : "1"
        func sent(until done: ([MemoryBroker.Published]) -> Bool) async throws -> [MemoryBroker.Published] {
            var sent: [MemoryBroker.Published] = []
            for _ in 0..<200 where !done(sent) {
                try await Task.sleep(for: .milliseconds(10))
                sent += bridge.broker.take().filter { $0.topic.hasPrefix("homie/5/smarthome-") }
            }
            return sent
        }
        _ = bridge.broker.take()
        ownership.update(holders: [held: 0, other: 1])
        let taken = try await sent { $0.contains { $0.topic == "homie/5/smarthome-\(held)/$state" && $0.payload == "ready" } }
        #expect(taken.first?.topic == "homie/5/smarthome-\(held)/$state" && taken.first?.payload == "init")
        #expect(taken.contains { $0.topic == "homie/5/smarthome-\(held)/$description" })
        #expect(!taken.contains { $0.topic.hasPrefix("homie/5/smarthome-\(other)/") }, "not held here: not published")

        // After a connect only the held user's device goes out, not the hash owner's.
        homie.connected()
        let again = try await sent { $0.contains { $0.topic == "homie/5/smarthome-\(held)/$state" && $0.payload == "ready" } }
        #expect(!again.contains { $0.topic.hasPrefix("homie/5/smarthome-\(other)/") })
    }
}
