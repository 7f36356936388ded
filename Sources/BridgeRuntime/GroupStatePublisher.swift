import BridgeCore
import Foundation
import Synchronization

/// The groups' states (README, "Groups"): `<base>/<user>/groups/<group>` and, for every light of
/// the user, `<base>/<user>/lights`, retained, `ON` when all of their lights are on and `OFF`
/// otherwise. A state-bus subscriber: a light that changed recomputes its user's groups, and a
/// state is published when it differs from the last one sent; after each connect all of them are
/// sent again. Commands to groups go through `CommandService` like every other command.
final class GroupStatePublisher: BridgeFeature, StateSubscriber {
    let name = "groups"

    private let store: HomeStore
    private let outbound: Outbound
    private let topics: Topics
    private let ownership: Ownership
    /// The payload last sent per topic; one entry per group and user, so bounded by the config.
    private let sent = Mutex<[String: String]>([:])

    init(store: HomeStore, outbound: Outbound, topics: Topics, ownership: Ownership) {
        self.store = store
        self.outbound = outbound
        self.topics = topics
        self.ownership = ownership
    }

    /// Every group state of one user: the topic and `ON`/`OFF`, all the user's lights first.
    static func states(of user: User, in home: Home, topics: Topics) -> [(topic: String, on: Bool)] {
        var states: [(String, Bool)] = []
        if case .success(let (_, rooms)) = home.groupTarget(user: user.id, group: nil) {
            states.append((topics.userLights(user: user.id), home.allLightsOn(user: user.id, rooms: rooms)))
        }
        for group in user.groups {
            guard case .success(let (_, rooms)) = home.groupTarget(user: user.id, group: group.name) else { continue }
            states.append((topics.group(user: user.id, group: group.name), home.allLightsOn(user: user.id, rooms: rooms)))
        }
        return states
    }

    func connected() {
        publish(users: nil, force: true)
    }

    func receive(_ changes: [StateChange]) {
        var users: Set<String> = []
        for case .reading(let change) in changes where change.sensor == .lights && change.origin != .mirror {
            users.insert(change.key.user)
        }
        if !users.isEmpty { publish(users: users, force: false) }
    }

    /// Computes and sends under one lock, reading the home inside it, so two changes made at once
    /// on two threads can never leave an older state on the broker after a newer one.
    private func publish(users wanted: Set<String>?, force: Bool) {
        sent.withLock { sent in
            let home = store.home
            for user in home.users where ownership.owns(user.id) && wanted?.contains(user.id) ?? true {
                for (topic, on) in Self.states(of: user, in: home, topics: topics) {
                    let payload = on ? "ON" : "OFF"
                    guard force || sent[topic] != payload else { continue }
                    sent[topic] = payload
                    outbound.send(topic, payload)
                }
            }
        }
    }
}
