import BridgeCore
import Foundation
import Synchronization

/// One change of the home's state, as the state bus hands it to its subscribers
/// (docs/architecture.md, "The state bus").
enum StateChange: Sendable {
    /// A sensor's new value.
    case reading(ReadingChange)
    /// A room became reachable or unreachable (its upstream, in REST mode).
    case availability(RoomKey, online: Bool)
    /// An event for the user's events topic and event streams.
    case event(user: String, BridgeEvent)
}

/// A sensor's value as it was applied to the home.
struct ReadingChange: Sendable {
    var key: RoomKey
    var sensor: SensorKind
    var value: SensorValue
    var time: Date
    var origin: ChangeOrigin
    /// Whether the state publisher sent it to the broker: set by `StatePublisher`, so history
    /// records exactly what was published and the event streams see the same.
    var published = false

    var reading: Reading { Reading(user: key.user, room: key.room, sensor: sensor, value: value) }
}

/// Where a change came from, which decides whether it is published.
enum ChangeOrigin: Sendable, Equatable {
    /// A source's reading: published when its payload changed or `publish.refresh` is due.
    case source
    /// A light a command switched: always published.
    case command(CommandOrigin)
    /// A value another cluster instance published for a user it owns: applied here and passed
    /// to the event streams, never published again nor recorded.
    case mirror
}

/// Where a light command came from.
enum CommandOrigin: Sendable, Equatable {
    /// An MQTT `/set` message; `redelivery` when the broker sent it again after a reconnect.
    case mqtt(topic: String, redelivery: Bool)
    case api
    case alarm

    /// The `source` of a `command_rejected` event and of the log lines.
    var name: String {
        switch self {
        case .mqtt: "mqtt"
        case .api: "api"
        case .alarm: "alarm"
        }
    }
}

/// Whoever wants the home's changes: the state bus calls `receive` with each batch, after the
/// state publisher marked what it published, on the thread that made the change (never blocks).
protocol StateSubscriber: Sendable {
    func receive(_ changes: [StateChange])
}

/// The state bus: every change of the home (a source's readings, a command, a mirrored value, an
/// availability, an event) is emitted here once and reaches the state publisher first, then every
/// other subscriber (history, the event streams, the command confirmations).
final class StateBus: Sendable {
    private let publisher: StatePublisher
    private let subscribers = Mutex<[any StateSubscriber]>([])

    init(publisher: StatePublisher) {
        self.publisher = publisher
    }

    /// Adds a subscriber (while the bridge is being built).
    func subscribe(_ subscriber: any StateSubscriber) {
        subscribers.withLock { $0.append(subscriber) }
    }

    /// - Parameter home: the home right after the changes, for the room JSON.
    func emit(_ changes: [StateChange], home: Home) {
        guard !changes.isEmpty else { return }
        let published = publisher.publish(changes, home: home)
        for subscriber in subscribers.withLock({ $0 }) { subscriber.receive(published) }
    }
}
