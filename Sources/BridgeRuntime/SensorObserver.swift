import BridgeCore
import Foundation
import Synchronization

/// Notes, from the state bus, when each sensor last sent a reading, when its value last changed, and
/// the value (README "Watchdogs"): what the watchdog monitor judges silence and sameness by. Every
/// reading counts, published or not (an unchanged one is a sign of life too); mirrored values of
/// another instance's users do not, as only the owner watches them.
final class SensorObserver: StateSubscriber {
    struct Key: Hashable, Sendable {
        var user: String
        var room: String
        var sensor: String
    }

    private let seen = Mutex<[Key: SensorObservation]>([:])

    func receive(_ changes: [StateChange]) {
        let readings = changes.compactMap { change -> ReadingChange? in
            guard case .reading(let reading) = change, reading.origin != .mirror else { return nil }
            return reading
        }
        guard !readings.isEmpty else { return }
        seen.withLock { seen in
            for reading in readings {
                let key = Key(user: reading.key.user, room: reading.key.room, sensor: reading.sensor.id)
                seen[key] = seen[key]?.noting(reading.value, at: reading.time)
                    ?? SensorObservation(lastReading: reading.time, lastChange: reading.time, value: reading.value)
            }
        }
    }

    func observation(user: String, room: String, sensor: String) -> SensorObservation? {
        seen.withLock { $0[Key(user: user, room: room, sensor: sensor)] }
    }
}
