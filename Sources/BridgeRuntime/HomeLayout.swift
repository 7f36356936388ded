import BridgeCore
import BridgeStorage
import Foundation
import Synchronization

/// Applies a new set of rooms to the running bridge without a restart (README, "Managing the
/// home"): the source reads the new rooms, the store takes them (values of rooms that stay are
/// kept), the devices are rebound when bindings changed, and the state publisher clears what went
/// and announces what came or changed, Home Assistant configs included. One change at a time.
final class HomeLayout: Sendable {
    private let store: HomeStore
    private let source: any Source
    private let devices: DeviceSource
    private let publisher: StatePublisher
    private let discovery: HomeAssistantDiscovery?
    private let announced: AnnouncedConfigStore
    /// Whose rooms the sources produce for: the users this instance owns (by hash, or those whose
    /// lease it holds now: docs/scaling.md, "Leases").
    private let sourced: @Sendable (_ user: String) -> Bool
    private let logger: Logger
    /// Told after each change (Homie sends its descriptions again).
    private let changed: @Sendable () -> Void
    private let serial = Mutex(())

    init(store: HomeStore, source: any Source, devices: DeviceSource, publisher: StatePublisher,
         discovery: HomeAssistantDiscovery?, announced: AnnouncedConfigStore,
         sourced: @escaping @Sendable (_ user: String) -> Bool, logger: Logger, changed: @escaping @Sendable () -> Void = {}) {
        self.changed = changed
        self.store = store
        self.source = source
        self.devices = devices
        self.publisher = publisher
        self.discovery = discovery
        self.announced = announced
        self.sourced = sourced
        self.logger = logger
    }

    /// Makes `users` (with every room, the config file's and the managed ones) the home's.
    @discardableResult
    func apply(_ users: [User]) -> LayoutDiff {
        serial.withLock { _ in
            let old = store.home
            let diff = LayoutDiff(old: old.users, new: users)
            guard !diff.isEmpty else {
                // Only users changed (a password, an admin flag, a user without rooms): no topic to touch.
                store.withLock { $0.home.setUsers(users) }
                return diff
            }
            let owned = users.filter { sourced($0.id) }
            let first = source.roomsChanged(owned)
            store.withLock { state in
                state.home.setUsers(users)
                Self.start(first, in: &state)
                for (user, room) in diff.removed { state.offline.remove(RoomKey(user: user.id, room: room.id)) }
            }
            publisher.roomDocuments.forget(diff.removed.map { RoomKey(user: $0.user.id, room: $0.room.id) })
            if diff.bindingsChanged { devices.rebind(users: owned) }
            let messages = publisher.announce(diff, old: old)
            if let discovery {
                do { try announced.replace(with: discovery.configTopics(home: store.home)) } catch {
                    logger.warning("cannot record the announced discovery configs", ["error": "\(error)"])
                }
            }
            changed()
            logger.info("rooms changed", ["added": String(diff.added.count), "removed": String(diff.removed.count),
                                          "changed": String(diff.changed.count), "messages": String(messages)])
            return diff
        }
    }

    /// The users this instance owns changed (a lease taken or handed back; docs/scaling.md,
    /// "Leases"): the source simulates or polls, and the devices are read, for the owned users only,
    /// so an instance does the work of its own users and not every user's. Called before a lease is
    /// handed back and after one is taken.
    func ownershipChanged(_ change: Ownership.Change) {
        serial.withLock { _ in
            let users = store.home.users
            let owned = users.filter { sourced($0.id) }
            let first = source.roomsChanged(owned)
            store.withLock { Self.start(first, in: &$0) }
            let moved = change.taken.union(change.released)
            if users.contains(where: { moved.contains($0.id) && $0.rooms.contains { !$0.bindings.isEmpty } }) {
                devices.rebind(users: owned)
            }
            logger.info("sources follow the leases", ["users": String(owned.count),
                                                     "rooms": String(owned.reduce(0) { $0 + $1.rooms.count })])
        }
    }

    /// A source's first values for sensors it did not read before, where the home has none: a
    /// user taken over keeps what the database last had (lights above all), not a fresh start.
    private static func start(_ first: [Reading], in state: inout HomeStore.State) {
        let now = Date()
        for reading in first where state.home.value(of: reading.sensor, in: RoomKey(user: reading.user, room: reading.room)) == nil {
            state.home.record(reading, at: now)
        }
    }
}
