import BridgeCore
import Synchronization

/// Where readings come from (`source.kind`; README, "Configuration"): the simulator, a REST upstream,
/// and whatever else reads a real home. A source is a feature: it produces readings in its
/// `run()` and hands them to the home controller, which emits them on the state bus.
protocol Source: BridgeFeature {
    /// Values the home holds before the first reading: not published by themselves, the retained
    /// state published at each connect carries them.
    func initialReadings() -> [Reading]
    /// Where light commands go before the state changes, when this source takes them; nil when
    /// the bridge keeps each light's state itself.
    var lightSwitch: (any LightSwitch)? { get }
    /// The rooms changed while running (README, "Managing the home"): from now on the source reads
    /// `users`' rooms (the users this instance owns, sensors bound to devices left out). Returns
    /// the first values of sensors it did not read before, for the home to start with.
    func roomsChanged(_ users: [User]) -> [Reading]
}

extension Source {
    func roomsChanged(_ users: [User]) -> [Reading] { [] }
}

/// `source.kind: simulated`: steps the simulator every `source.interval` (as fast as it can at 0)
/// for the users it is given: those this instance owns, by hash or, on PostgreSQL, by lease, the
/// rooms reshaped when a lease moves (docs/scaling.md, "Leases").
final class SimulatedSource: Source {
    let name = "simulator"
    let lightSwitch: (any LightSwitch)? = nil

    private let start: Simulator
    /// The running simulator, reshaped when rooms change.
    private let simulator: Mutex<Simulator>
    private let interval: Double
    private let controller: HomeController
    private let broker: any BrokerLink

    init(configuration: BridgeConfiguration, controller: HomeController, broker: any BrokerLink, logger: Logger) {
        let seed: UInt64
        if let configured = configuration.source.seed {
            seed = configured
        } else {
            seed = UInt64.random(in: 0...UInt64.max)
            logger.info("simulating with a random seed; set source.seed to repeat this run", ["seed": String(seed)])
        }
        // The configuration the bridge hands over is already the users it sources (docs/scaling.md, "Leases").
        let start = Simulator(users: Self.unbound(configuration.users), seed: seed)
        self.start = start
        simulator = Mutex(start)
        interval = configuration.source.interval
        self.controller = controller
        self.broker = broker
    }

    func initialReadings() -> [Reading] {
        start.initialReadings()
    }

    /// The rooms simulated now.
    var rooms: [RoomKey] { simulator.withLock { $0.rooms } }

    /// Sensors bound to a device are the device's: only the others are simulated.
    private static func unbound(_ users: [User]) -> [User] {
        users.map { user in
            var unbound = user
            unbound.rooms = user.rooms.map { Room(id: $0.id, name: $0.name, sensors: $0.unboundSensors) }
            return unbound
        }
    }

    func roomsChanged(_ users: [User]) -> [Reading] {
        simulator.withLock { $0.reshape(users: Self.unbound(users)) }
    }

    func run() async {
        while !Task.isCancelled {
            if interval > 0 {
                do { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) } catch { break }
            } else {
                await Task.yield()
            }
            // A step waits for the broker rather than queue without end (interval 0, a large home).
            await broker.waitForBacklog(below: StatePublisher.backlogLimit)
            controller.record(simulator.withLock { $0.step() })
        }
    }
}
