import BridgeCore
import Foundation
@testable import BridgeRuntime

/// The command path and the state bus of a bridge for the demo's two users, on a `MemoryBroker`.
struct RuntimeFixture {
    let broker = MemoryBroker()
    let configuration: BridgeConfiguration
    let store: HomeStore
    let publisher: StatePublisher
    let bus: StateBus
    let controller: HomeController
    let commands: CommandService
    /// With `groups`: the groups' states on the bus.
    let groupStates: GroupStatePublisher?
    let logger = Logger(level: .error)

    /// - Parameter groups: user 1's groups; then user 1 also has a Hall with lights only, and the
    ///   groups' state publisher is on the bus.
    init(refresh: Double = 300, instances: Int = 1, index: Int = 0, lights: (any LightSwitch)? = nil,
         groups: [LightGroup]? = nil) {
        var configuration = BridgeConfiguration()
        configuration.users = [
            User(id: "1", username: "Cemalettin", passwordHash: "x", rooms: [
                Room(id: "kitchen", name: "Kitchen", sensors: Room.defaultSensors(forRoomNamed: "Kitchen")),
                Room(id: "garden", name: "Garden", sensors: [.temperature]),
            ] + (groups == nil ? [] : [Room(id: "hall", name: "Hall", sensors: [.lights])]), groups: groups ?? []),
            User(id: "2", username: "Mehmet", passwordHash: "y", rooms: [
                Room(id: "kitchen", name: "Kitchen", sensors: Room.defaultSensors(forRoomNamed: "Kitchen")),
            ]),
        ]
        configuration.publish.refresh = refresh
        configuration.cluster.instances = instances
        configuration.cluster.index = index
        self.configuration = configuration
        store = HomeStore(home: Home(users: configuration.users))
        publisher = StatePublisher(configuration: configuration, store: store, broker: broker, logger: logger,
                                   discovery: nil, startedAt: Date())
        bus = StateBus(publisher: publisher)
        let ownership = Ownership(membership: configuration.cluster.membership, leases: nil)
        controller = HomeController(store: store, bus: bus, ownership: ownership)
        commands = CommandService(controller: controller, configuration: configuration,
                                  outbound: Outbound(broker: broker, qos: 1, logger: logger), logger: logger,
                                  lights: { _ in lights }, switchTimeout: 2)
        bus.subscribe(commands)
        let (store, broker, logger) = (store, broker, logger)
        groupStates = groups.map { _ in
            GroupStatePublisher(store: store, outbound: Outbound(broker: broker, qos: 1, logger: logger),
                                topics: Topics(base: configuration.mqtt.baseTopic),
                                ownership: ownership)
        }
        if let groupStates { bus.subscribe(groupStates) }
    }
}

/// A state bus subscriber that keeps what it is handed.
final class Collector: StateSubscriber, @unchecked Sendable {
    // @unchecked: the tests call the bus from one thread at a time.
    var batches: [[StateChange]] = []

    func receive(_ changes: [StateChange]) { batches.append(changes) }

    var publishedReadings: [ReadingChange] {
        batches.flatMap { $0 }.compactMap { change in
            if case .reading(let reading) = change, reading.published { return reading }
            return nil
        }
    }
}
