import BridgeCore
import BridgeMQTT
import Foundation
import Synchronization

/// Homie 5 devices beside Home Assistant discovery (README, "Homie"), from the same home: after
/// each connect every owned user's device goes `init`, gets its `$description` and values, then
/// `ready`; each published reading is sent on as its property's value. The root device lives on a
/// connection of its own whose last will says `lost`, so a bridge that dies takes every device of
/// its tree with it (Homie 5's rule for children). Light commands on `…/lights/set` go through
/// `CommandService` like every other command.
final class HomieFeature: BridgeFeature, StateSubscriber {
    let name = "homie"

    private let devices: HomieDevices
    private let store: HomeStore
    private let outbound: Outbound
    private let broker: any BrokerLink
    /// Whose devices this instance publishes: the users it owns, by hash or by lease
    /// (docs/scaling.md, "Leases").
    private let ownership: Ownership
    private let presence: MQTTClient
    private let logger: Logger
    private let republishing = CoalescedSignal()
    /// Users taken over by a lease round and not yet published, and whether the root device's
    /// children changed since it was last described.
    private let takenOver = Mutex<(users: Set<String>, rootChanged: Bool)>(([], false))
    private let ownershipMoved = CoalescedSignal()
    /// Sensors beyond the configured ones already in a description: at most the sensors an
    /// upstream reports, which `Home` keeps anyway.
    private let described = Mutex<Set<RoomSensor>>([])

    private struct RoomSensor: Hashable {
        var key: RoomKey
        var sensor: String
    }

    init(configuration: BridgeConfiguration, brokerURL: BrokerURL, devices: HomieDevices, store: HomeStore,
         broker: any BrokerLink, ownership: Ownership? = nil, logger: Logger) throws {
        self.devices = devices
        self.store = store
        self.broker = broker
        self.logger = logger
        self.ownership = ownership ?? Ownership(membership: configuration.cluster.membership, leases: nil)
        outbound = Outbound(broker: broker, qos: configuration.mqtt.qos, logger: logger)
        var presenceConfiguration = try Bridge.mqttConfiguration(configuration, broker: brokerURL, logger: logger)
        presenceConfiguration.clientID = configuration.clientID + "-homie"
        presenceConfiguration.will = .init(topic: devices.stateTopic(device: devices.rootID), payload: Array("lost".utf8),
                                           qos: 1, retain: true)
        presenceConfiguration.cleanSession = true
        presence = try MQTTClient(configuration: presenceConfiguration)
    }

    private var ownedUsers: [User] { store.home.users.filter { ownership.owns($0.id) } }

    func connected() {
        republishing.request()
    }

    /// Rooms changed while running (README, "Managing the home"): every device's description is
    /// sent again (`init`, the description, the values, `ready`), as Homie wants for a changed one.
    func roomsChanged() {
        republishing.request()
    }

    /// A lease round moved users (docs/scaling.md, "Leases"): the root device is described again
    /// with this instance's users as its children, and the devices of the users taken over are
    /// published (`init`, description, values, `ready`); their old owner's root no longer lists them.
    func ownershipChanged(_ change: Ownership.Change) {
        takenOver.withLock { pending in
            pending.users.formUnion(change.taken)
            pending.users.subtract(change.released)
            pending.rootChanged = true
        }
        ownershipMoved.request()
    }

    func run() async {
        do {
            try presence.start()
        } catch {
            logger.error("cannot start the Homie connection", ["error": error.description])
            return
        }
        await withDiscardingTaskGroup { group in
            group.addTask {
                // The root device on its own connection, again after each of its reconnects (its will
                // said `lost` meanwhile).
                for await event in self.presence.events {
                    if case .connected = event { self.sendRoot(state: "ready") }
                }
            }
            group.addTask {
                for await _ in self.republishing.requests {
                    if Task.isCancelled { break }
                    await self.publishDevices(self.ownedUsers)
                }
            }
            group.addTask {
                for await _ in self.ownershipMoved.requests {
                    if Task.isCancelled { break }
                    let (taken, rootChanged) = self.takenOver.withLock { pending in
                        defer { pending = ([], false) }
                        return pending
                    }
                    if rootChanged { self.sendRoot(state: "ready") }
                    await self.publishDevices(self.ownedUsers.filter { taken.contains($0.id) })
                }
            }
        }
    }

    private func sendRoot(state: String) {
        let root = devices.rootID
        do {
            try presence.publish(topic: devices.descriptionTopic(device: root),
                                 text: devices.rootDescription(users: ownedUsers).serialized, qos: 1, retain: true)
            try presence.publish(topic: devices.stateTopic(device: root), text: state, qos: 1, retain: true)
        } catch {
            logger.debug("Homie root publish failed", ["error": error.description])
        }
    }

    /// These users' devices, user by user, waiting for the broker in between like the retained
    /// state (`StatePublisher.backlogLimit`).
    private func publishDevices(_ users: [User]) async {
        for user in users {
            await broker.waitForBacklog(below: StatePublisher.backlogLimit)
            if Task.isCancelled { return }
            let home = store.home
            let device = devices.deviceID(of: user)
            outbound.send(devices.stateTopic(device: device), "init")
            outbound.send(devices.descriptionTopic(device: device), devices.description(of: user, home: home).serialized)
            for room in user.rooms {
                let values = home.values(in: RoomKey(user: user.id, room: room.id))
                for sensor in home.sensors(of: room, user: user.id) {
                    guard let value = values[sensor] else { continue }
                    outbound.send(devices.propertyTopic(user: user, room: room.id, sensor: sensor), HomieDevices.payload(value))
                }
            }
            outbound.send(devices.stateTopic(device: device), "ready")
        }
    }

    /// What the state publisher sent goes on to the devices' properties. A sensor a REST upstream
    /// reported beyond the configured ones changes the device's description, which Homie allows
    /// only in `init`: that device goes `init`, gets its new description, then `ready` again.
    func receive(_ changes: [StateChange]) {
        let home = store.home
        var redescribed: Set<String> = []
        for case .reading(let change) in changes where change.published {
            guard let user = home.user(id: change.key.user) else { continue }
            if !redescribed.contains(user.id),
               let room = user.rooms.first(where: { $0.id == change.key.room }), !room.sensors.contains(change.sensor),
               described.withLock({ $0.insert(RoomSensor(key: change.key, sensor: change.sensor.id)).inserted }) {
                redescribed.insert(user.id)
                let device = devices.deviceID(of: user)
                outbound.send(devices.stateTopic(device: device), "init")
                outbound.send(devices.descriptionTopic(device: device), devices.description(of: user, home: home).serialized)
                outbound.send(devices.stateTopic(device: device), "ready")
            }
            outbound.send(devices.propertyTopic(user: user, room: change.key.room, sensor: change.sensor),
                          HomieDevices.payload(change.value))
        }
    }

    /// Every device `disconnected`, then the Homie connection closed cleanly (so its will stays unsaid).
    func shutdown() async {
        for user in ownedUsers { outbound.send(devices.stateTopic(device: devices.deviceID(of: user)), "disconnected", qos: 1) }
        sendRoot(state: "disconnected")
        _ = await presence.waitForPublished(timeout: 2)
        presence.stop()
    }
}
