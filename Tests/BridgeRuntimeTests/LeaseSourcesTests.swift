import BridgeCore
import BridgeStorage
import Foundation
import Testing
@testable import BridgeRuntime

/// Sources that follow the leases (docs/scaling.md, "Leases"): an instance simulates or polls,
/// and reads the devices of, only the users whose lease it holds, reshaped when a lease is taken
/// or handed back, through the same `HomeLayout` that applies room changes.
@Suite struct LeaseSourcesTests {
    enum Kind: CaseIterable { case simulated, rest }

    /// Instance 0 of two, by lease (a real lease store, on SQLite here), with user 1 (two rooms)
    /// and user 2 (a kitchen whose temperature a zigbee2mqtt device reports).
    struct Cluster {
        let broker = MemoryBroker()
        let store: HomeStore
        let ownership: Ownership
        let source: any Source
        let devices: DeviceSource
        let folder: URL

        init(_ kind: Kind) throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("lease-sources-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let database = try Database(path: folder.appendingPathComponent("bridge.sqlite").path)
            var configuration = BridgeConfiguration()
            var kitchen = Room(id: "kitchen", name: "Kitchen", sensors: Room.defaultSensors(forRoomNamed: "Kitchen"))
            kitchen.bindings[.temperature] = BoundSensor(binding: .zigbee2mqtt(device: "bed_climate", field: nil))
            configuration.users = [
                User(id: "1", username: "Cemalettin", passwordHash: "x", rooms: [
                    Room(id: "kitchen", name: "Kitchen", sensors: Room.defaultSensors(forRoomNamed: "Kitchen")),
                    Room(id: "garden", name: "Garden", sensors: [.temperature]),
                ]),
                User(id: "2", username: "Mehmet", passwordHash: "y", rooms: [kitchen]),
            ]
            configuration.cluster.instances = 2
            configuration.cluster.index = 0
            configuration.source.seed = 1
            configuration.source.baseURL = "http://127.0.0.1:9"
            let logger = Logger(level: .error)
            let ownership = Ownership(membership: configuration.cluster.membership, leases: LeaseStore(database: database))
            self.ownership = ownership
            let store = HomeStore(home: Home(users: configuration.users))
            self.store = store
            let publisher = StatePublisher(configuration: configuration, store: store, broker: broker, logger: logger,
                                           discovery: nil, startedAt: Date(), ownership: ownership)
            let controller = HomeController(store: store, bus: StateBus(publisher: publisher), ownership: ownership)
            // As the bridge builds them: nobody owned before the first lease round.
            var sourced = configuration
            sourced.users = []
            source = kind == .rest
                ? RestSource(configuration: sourced, controller: controller,
                             client: UpstreamClient(source: configuration.source), logger: logger)
                : SimulatedSource(configuration: sourced, controller: controller, broker: broker, logger: logger)
            devices = try DeviceSource(configuration: configuration, bound: [], controller: controller,
                                       bridgeBroker: broker, bridgeBrokerAddress: "memory",
                                       router: MessageRouter(broker: broker, logger: logger), logger: logger)
            let layout = HomeLayout(store: store, source: source, devices: devices, publisher: publisher, discovery: nil,
                                    announced: AnnouncedConfigStore(database: database, instance: 0),
                                    sourced: { ownership.owns($0) }, logger: logger)
            ownership.onChange { layout.ownershipChanged($0) }
        }

        /// The rooms the source reads now.
        var sourcedRooms: Set<RoomKey> {
            switch source {
            case let simulated as SimulatedSource: Set(simulated.rooms)
            case let rest as RestSource: rest.rooms
            default: []
            }
        }
    }

    static func keys(_ user: String, _ rooms: String...) -> Set<RoomKey> {
        Set(rooms.map { RoomKey(user: user, room: $0) })
    }

    @Test(arguments: Kind.allCases)
    func theSourcesReadOnlyTheUsersWhoseLeaseTheInstanceHolds(kind: Kind) throws {
        let cluster = try Cluster(kind)
        defer { try? FileManager.default.removeItem(at: cluster.folder) }
        let user1 = Self.keys("1", "kitchen", "garden")
        let user2 = Self.keys("2", "kitchen")
        #expect(cluster.sourcedRooms.isEmpty, "nobody before the first round")

        // The first round: user 1 is held here, user 2 by instance 1.
        cluster.ownership.update(holders: ["1": 0, "2": 1])
        #expect(cluster.sourcedRooms == user1)
        #expect(cluster.devices.deviceFilters.isEmpty)
        #expect(!cluster.broker.subscriptions.contains("zigbee2mqtt/bed_climate"))

        // Instance 1 died and this one took user 2, whose light the database had on.
        _ = cluster.store.withLock { state in
            state.home.record(Reading(user: "2", room: "kitchen", sensor: .lights, value: .binary(true)), at: Date())
        }
        cluster.ownership.update(holders: ["1": 0, "2": 0])
        #expect(cluster.sourcedRooms == user1.union(user2))
        #expect(cluster.devices.deviceFilters == ["zigbee2mqtt/bed_climate", "zigbee2mqtt/bed_climate/availability"])
        #expect(cluster.broker.subscriptions.contains("zigbee2mqtt/bed_climate"))
        let home = cluster.store.home
        #expect(home.value(of: .lights, in: RoomKey(user: "2", room: "kitchen")) == .binary(true),
                "a value the home had is not replaced by the source's first one")
        if kind == .simulated {
            #expect(home.value(of: .humidity, in: RoomKey(user: "2", room: "kitchen")) != nil,
                    "the simulator's first values where the home had none")
        }

        // Handed back to instance 1: this instance stops reading user 2.
        cluster.ownership.update(holders: ["1": 0, "2": 1])
        #expect(cluster.sourcedRooms == user1)
        #expect(cluster.devices.deviceFilters.isEmpty)
        #expect(!cluster.broker.subscriptions.contains("zigbee2mqtt/bed_climate"))
    }
}
