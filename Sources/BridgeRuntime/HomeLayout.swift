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
    /// Whose rooms the sources produce for: the owned users by hash; every user by lease, whose
    /// readings the controller keeps only for the users owned now (docs/scaling.md, "Leases").
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
            let now = Date()
            store.withLock { state in
                state.home.setUsers(users)
                for reading in first { state.home.record(reading, at: now) }
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
}
