/// Simulated room sensors (README, "MQTT"): temperature and humidity wander slowly inside
/// their ranges, movement comes in bursts, gas leaks are rare. Lights are not simulated: they
/// change only by command.
public struct Simulator: Sendable {
    /// The ranges the simulated values stay in.
    public static let temperatureRange = 25.0...27.0
    public static let humidityRange = 50.0...60.0

    /// Largest change of one step; small enough that the published value (one decimal) moves slowly.
    static let temperatureStep = 0.1
    static let humidityStep = 0.3
    /// Chance per step that a quiet room sees movement, and how many steps a burst lasts.
    static let movementChance = 0.08
    static let movementBurst = 1...4
    /// Chance per step of a gas event (rare), and how many steps it lasts.
    static let gasChance = 0.002
    static let gasDuration = 1...3

    private struct RoomState: Sendable {
        var key: RoomKey
        var sensors: [SensorKind]
        var temperature: Double
        var humidity: Double
        var movementStepsLeft = 0
        var gasStepsLeft = 0
    }

    private var generator: SeededGenerator
    private var roomStates: [RoomState] = []

    /// - Parameters:
    ///   - users: whose rooms to simulate, in this order (the order is part of the sequence).
    ///   - seed: the same seed and users give the same sequence of readings.
    public init(users: [User], seed: UInt64) {
        generator = SeededGenerator(seed: seed)
        for user in users {
            for room in user.rooms {
                let temperature = Double.random(in: Simulator.temperatureRange, using: &generator)
                let humidity = Double.random(in: Simulator.humidityRange, using: &generator)
                roomStates.append(
                    RoomState(
                        key: RoomKey(user: user.id, room: room.id),
                        sensors: room.sensors,
                        temperature: temperature,
                        humidity: humidity
                    )
                )
            }
        }
    }

    /// Simulates `users`' rooms from now on (README, "Managing the home"): rooms that stay keep
    /// their state and take the new sensor lists, new rooms start inside the ranges. Returns the
    /// first value of every sensor that was not simulated before.
    public mutating func reshape(users: [User]) -> [Reading] {
        let previous = Dictionary(roomStates.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        roomStates = []
        var first: [Reading] = []
        for user in users {
            for room in user.rooms {
                let key = RoomKey(user: user.id, room: room.id)
                var state = previous[key] ?? RoomState(
                    key: key, sensors: [],
                    temperature: Double.random(in: Simulator.temperatureRange, using: &generator),
                    humidity: Double.random(in: Simulator.humidityRange, using: &generator))
                let known = Set(state.sensors)
                state.sensors = room.sensors
                roomStates.append(state)
                first += room.sensors.filter { !known.contains($0) }.map { sensor in
                    Reading(user: user.id, room: room.id, sensor: sensor, value: currentValue(sensor, of: state))
                }
            }
        }
        return first
    }

    /// The rooms simulated, in the order they are stepped.
    public var rooms: [RoomKey] { roomStates.map(\.key) }

    /// The first value of every sensor, lights off.
    public func initialReadings() -> [Reading] {
        roomStates.flatMap { room in
            room.sensors.map { sensor in
                Reading(user: room.key.user, room: room.key.room, sensor: sensor, value: currentValue(sensor, of: room))
            }
        }
    }

    /// Advances every room by one step and returns the new value of every simulated sensor
    /// (lights excluded); callers publish only those that changed.
    public mutating func step() -> [Reading] {
        var readings: [Reading] = []
        readings.reserveCapacity(roomStates.count * 3)
        for index in roomStates.indices {
            Simulator.advance(&roomStates[index], using: &generator)
            let room = roomStates[index]
            for sensor in room.sensors where sensor != .lights {
                readings.append(
                    Reading(user: room.key.user, room: room.key.room, sensor: sensor, value: currentValue(sensor, of: room))
                )
            }
        }
        return readings
    }

    private static func advance(_ room: inout RoomState, using generator: inout SeededGenerator) {
        room.temperature = Simulator.walk(
            room.temperature, by: Simulator.temperatureStep, within: Simulator.temperatureRange, using: &generator
        )
        room.humidity = Simulator.walk(
            room.humidity, by: Simulator.humidityStep, within: Simulator.humidityRange, using: &generator
        )
        if room.movementStepsLeft > 0 {
            room.movementStepsLeft -= 1
        } else if Double.random(in: 0..<1, using: &generator) < Simulator.movementChance {
            room.movementStepsLeft = Int.random(in: Simulator.movementBurst, using: &generator)
        }
        if room.gasStepsLeft > 0 {
            room.gasStepsLeft -= 1
        } else if Double.random(in: 0..<1, using: &generator) < Simulator.gasChance {
            room.gasStepsLeft = Int.random(in: Simulator.gasDuration, using: &generator)
        }
    }

    /// One step of a random walk that reflects off the range's ends, so it never leaves the range.
    static func walk(
        _ value: Double, by maxStep: Double, within range: ClosedRange<Double>, using generator: inout SeededGenerator
    ) -> Double {
        var next = value + Double.random(in: -maxStep...maxStep, using: &generator)
        if next > range.upperBound { next = 2 * range.upperBound - next }
        if next < range.lowerBound { next = 2 * range.lowerBound - next }
        return min(max(next, range.lowerBound), range.upperBound)
    }

    private func currentValue(_ sensor: SensorKind, of room: RoomState) -> SensorValue {
        switch sensor {
        case .temperature: .number(room.temperature)
        case .humidity: .number(room.humidity)
        case .lights: .binary(false)
        case .movement: .binary(room.movementStepsLeft > 0)
        case .gas: .binary(room.gasStepsLeft > 0)
        default: .text("")
        }
    }
}
