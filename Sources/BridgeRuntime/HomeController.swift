import BridgeCore
import BridgeStorage
import Foundation

/// The one way the home changes: a source's readings, a switched light, a value mirrored from
/// another instance, an availability or an event is applied to the store and emitted, once, on
/// the state bus (docs/architecture.md, "The state bus").
final class HomeController: Sendable {
    let store: HomeStore
    let bus: StateBus
    /// The users this instance acts for: only their sources' readings and availability are applied.
    let ownership: Ownership

    init(store: HomeStore, bus: StateBus, ownership: Ownership) {
        self.store = store
        self.bus = bus
        self.ownership = ownership
    }

    /// Values the home starts with (a simulator's first step, polled rooms' lights off), not
    /// published: the retained state published at each connect carries them.
    func seed(_ readings: [Reading]) {
        store.withLock { state in
            for reading in readings { state.home.record(reading, at: Date()) }
        }
    }

    /// A source's readings; a `gas` event when gas comes or goes (a first reading only when it
    /// says gas: a polled room's first "no gas" is no news). Readings of users this instance does
    /// not own are dropped: their owner publishes them (a source's step already under way when a
    /// lease moves may still carry the user's readings: docs/scaling.md, "Leases").
    func record(_ readings: [Reading]) {
        let time = Date()
        var owned: [String: Bool] = [:]
        let readings = readings.filter { reading in
            if let known = owned[reading.user] { return known }
            let owns = ownership.owns(reading.user)
            owned[reading.user] = owns
            return owns
        }
        guard !readings.isEmpty else { return }
        let (changes, home) = store.withLock { state -> ([StateChange], Home) in
            var changes: [StateChange] = []
            changes.reserveCapacity(readings.count)
            for reading in readings {
                // A reading for a room that went while it was on its way (a poll, a queued device
                // message) would publish a topic the change cleared.
                guard state.home.user(id: reading.user)?.rooms.contains(where: { $0.id == reading.room }) == true
                else { continue }
                let key = RoomKey(user: reading.user, room: reading.room)
                let first = reading.sensor == .gas && state.home.value(of: .gas, in: key) == nil
                let changed = state.home.record(reading, at: time)
                changes.append(.reading(ReadingChange(key: key, sensor: reading.sensor, value: reading.value,
                                                      time: time, origin: .source)))
                if reading.sensor == .gas, changed, case .binary(let detected) = reading.value, detected || !first {
                    changes.append(.event(user: reading.user, .gas(room: reading.room, detected: detected, at: time)))
                }
            }
            return (changes, state.home)
        }
        bus.emit(changes, home: home)
    }

    /// Offers every current value of the owned rooms to the state bus again, unchanged, without
    /// touching the home: the publisher sends those whose `publish.refresh` is due. Values that get
    /// no new readings (lights change only by command) are refreshed this way too.
    func offerForRefresh() {
        let home = store.home
        let time = Date()
        var changes: [StateChange] = []
        for user in home.users where ownership.owns(user.id) {
            for room in user.rooms {
                let key = RoomKey(user: user.id, room: room.id)
                for (sensor, value) in home.values(in: key) {
                    changes.append(.reading(ReadingChange(key: key, sensor: sensor, value: value, time: time,
                                                          origin: .source)))
                }
            }
        }
        bus.emit(changes, home: home)
    }

    /// Switches a light a command resolved to `target`; returns the new reading.
    func switchLight(_ target: CommandTarget, on: Bool, origin: CommandOrigin) -> Reading {
        let time = Date()
        let change = ReadingChange(key: target.key, sensor: .lights, value: .binary(on), time: time,
                                   origin: .command(origin))
        let home = store.withLock { state -> Home in
            state.home.record(change.reading, at: time)
            return state.home
        }
        bus.emit([.reading(change)], home: home)
        return change.reading
    }

    /// A value another cluster instance published for a user it owns.
    func mirror(_ reading: Reading) {
        let time = Date()
        let home = store.withLock { state -> Home in
            state.home.record(reading, at: time)
            return state.home
        }
        bus.emit([.reading(ReadingChange(key: RoomKey(user: reading.user, room: reading.room), sensor: reading.sensor,
                                         value: reading.value, time: time, origin: .mirror))], home: home)
    }

    /// Marks a polled room online or offline and publishes its retained availability (the owner
    /// only; the others keep it for when they take the user over).
    func setAvailability(_ key: RoomKey, online: Bool) {
        let home = store.withLock { state -> Home in
            if online { state.offline.remove(key) } else { state.offline.insert(key) }
            return state.home
        }
        guard ownership.owns(key.user) else { return }
        bus.emit([.availability(key, online: online)], home: home)
    }

    /// An event for the user's events topic and event streams.
    func publishEvent(user: String, _ event: BridgeEvent) {
        bus.emit([.event(user: user, event)], home: store.home)
    }

    /// Puts back the last values recorded before a restart (lights above all: they change only by
    /// command, so without this a restart would switch every light off).
    func restore(_ rows: [HistoryStore.Row]) -> Int {
        store.withLock { state in
            var restored = 0
            for row in rows {
                let sensor = SensorKind.named(row.sensor)
                // Only rooms still configured; their sensors may include ones an upstream reported.
                guard state.home.user(id: row.user)?.rooms.contains(where: { $0.id == row.room }) == true,
                      let value = SensorValue.parse(row.value, for: sensor)
                else { continue }
                state.home.record(Reading(user: row.user, room: row.room, sensor: sensor, value: value), at: row.time)
                restored += 1
            }
            return restored
        }
    }
}

/// A light command's target, resolved once against the home: the user, the room and its key.
struct CommandTarget: Sendable {
    let user: User
    let room: Room

    var key: RoomKey { RoomKey(user: user.id, room: room.id) }

    /// Resolves `room` (an id or display name) of `user`; the sensor must be a light the room has.
    static func resolve(user: String, room: String, sensor: String = SensorKind.lights.id, in home: Home)
        -> Result<CommandTarget, CommandRejection>
    {
        home.commandTarget(user: user, room: room, sensor: sensor).map { CommandTarget(user: $0.0, room: $0.1) }
    }
}
