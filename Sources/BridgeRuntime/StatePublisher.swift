import BridgeCore
import BridgeMQTT
import Foundation
import Synchronization

/// Publishes the home's state over MQTT: each change as the state bus hands it over (a reading
/// when its payload changed or `publish.refresh` is due, then its room's JSON), and everything,
/// retained, after every (re)connect, so a broker that restarted without persistence has the
/// whole home again (README, "MQTT"). It owns the publish tracker, and serialises each
/// room's JSON once per change, from the home as the change left it, outside the store's lock.
final class StatePublisher: BridgeFeature {
    let name = "state"

    /// How many messages may wait for the broker before a producer of many (a simulator tick, the
    /// retained state after a connect) waits for it: the back-pressure that keeps every reading
    /// while connected without holding a whole large home in memory at once.
    static let backlogLimit = 2_000

    private let configuration: BridgeConfiguration
    private let store: HomeStore
    private let outbound: Outbound
    private let broker: any BrokerLink
    private let logger: Logger
    private let topics: Topics
    /// The users whose retained state this instance publishes.
    let ownership: Ownership
    private var membership: ClusterMembership { ownership.membership }
    private let discovery: HomeAssistantDiscovery?
    private let startedAt: Date
    private let tracker: Mutex<PublishTracker>
    /// Rooms' JSON, shared with the HTTP routes.
    let roomDocuments: RoomDocuments
    private let clockStart = ContinuousClock.now
    private let republishing = CoalescedSignal()
    /// Users taken over and not yet republished (`publishTakenOver`).
    private let takenOver = CoalescedSet<String>()
    /// Cluster: whether another instance is still online (then `bridge/state` stays `online`).
    private let othersOnline: @Sendable () -> Bool

    init(configuration: BridgeConfiguration, store: HomeStore, broker: any BrokerLink, logger: Logger,
         discovery: HomeAssistantDiscovery?, startedAt: Date, roomDocuments: RoomDocuments = RoomDocuments(),
         othersOnline: @escaping @Sendable () -> Bool = { false }, ownership: Ownership? = nil) {
        self.ownership = ownership ?? Ownership(membership: configuration.cluster.membership, leases: nil)
        self.roomDocuments = roomDocuments
        self.configuration = configuration
        self.store = store
        self.broker = broker
        self.logger = logger
        self.discovery = discovery
        self.startedAt = startedAt
        self.othersOnline = othersOnline
        outbound = Outbound(broker: broker, qos: configuration.mqtt.qos, logger: logger)
        topics = Topics(base: configuration.mqtt.baseTopic)
        tracker = Mutex(PublishTracker(refresh: configuration.publish.refresh))
    }

    /// Seconds on a monotonic clock, for the publish tracker.
    private var now: Double {
        let elapsed = ContinuousClock.now - clockStart
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    // MARK: Changes

    /// Publishes what the changes call for and returns them with `published` set on the readings
    /// that went out. Under the tracker's lock, so two batches never interleave on a topic.
    func publish(_ changes: [StateChange], home: Home) -> [StateChange] {
        tracker.withLock { tracker in
            let now = self.now
            var changes = changes
            var touched: [RoomKey: Bool] = [:]
            var touchedOrder: [RoomKey] = []
            var messages: [(String, [UInt8], Bool)] = []
            for index in changes.indices {
                switch changes[index] {
                case .reading(var change):
                    let topic = topics.sensor(user: change.key.user, room: change.key.room, sensor: change.sensor)
                    let payload = change.value.mqttPayload
                    switch change.origin {
                    case .mirror:
                        continue
                    case .command:
                        tracker.markPublished(topic: topic, payload: payload, now: now)
                    case .source:
                        guard tracker.shouldPublish(topic: topic, payload: payload, now: now) else { continue }
                    }
                    change.published = true
                    changes[index] = .reading(change)
                    messages.append((topic, Array(payload.utf8), true))
                    let forced = change.origin != .source
                    if let seen = touched[change.key] {
                        touched[change.key] = seen || forced
                    } else {
                        touched[change.key] = forced
                        touchedOrder.append(change.key)
                    }
                case .availability(let key, let online):
                    messages.append((topics.availability(user: key.user, room: key.room),
                                     Array((online ? "online" : "offline").utf8), true))
                case .event(_, .relayed):
                    continue
                case .event(let user, let event):
                    messages.append((topics.events(user: user), Array(event.serialized.utf8), false))
                }
            }
            for key in touchedOrder {
                guard let user = home.user(id: key.user), let room = user.rooms.first(where: { $0.id == key.room })
                else { continue }
                let topic = topics.room(user: key.user, room: key.room)
                let bytes = roomDocuments.document(room, user: key.user, in: home).bytes
                let payload = String(decoding: bytes, as: UTF8.self)
                if touched[key] == true {
                    tracker.markPublished(topic: topic, payload: payload, now: now)
                } else if !tracker.shouldPublish(topic: topic, payload: payload, now: now) {
                    continue
                }
                messages.append((topic, bytes, true))
            }
            for (topic, payload, retain) in messages { outbound.send(topic, bytes: payload, retain: retain) }
            return changes
        }
    }

    /// Publishes a message outside the home's state (another instance's rooms, cluster topics).
    func send(_ topic: String, _ payload: String, retain: Bool = true) {
        outbound.send(topic, payload, retain: retain)
    }

    // MARK: Everything, retained

    /// Republishes everything, retained; requests made while one is pending coalesce into it.
    func republish() {
        republishing.request()
    }

    func connected() {
        republish()
    }

    /// Users this instance has just taken over (docs/scaling.md, "Leases") get their retained state,
    /// Home Assistant configs and availability at once; called from a lease round, drained in `run()`.
    /// At most every configured user waits, however many rounds come meanwhile.
    func publishTakenOver(_ users: Set<String>) {
        takenOver.add(users)
    }

    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in self.republishing.requests {
                    if Task.isCancelled { break }
                    await self.publishEverything()
                }
            }
            group.addTask {
                await self.takenOver.forEachBatch { users in
                    _ = await self.publishRetained(users: { users.contains($0) })
                }
            }
            group.addTask { await self.refreshUnchanged() }
        }
    }

    /// Who offers the current values again every half `publish.refresh` (set by `Bridge`).
    let refreshSource = Mutex<(@Sendable () -> Void)?>(nil)

    /// Every half `publish.refresh`, the current values are offered again: those not published for
    /// a whole refresh go out (and are recorded), so a value without new readings is refreshed too.
    private func refreshUnchanged() async {
        let interval = configuration.publish.refresh / 2
        while !Task.isCancelled {
            do { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) } catch { return }
            refreshSource.withLock { $0 }?()
        }
    }

    /// State, info and every current value, room by room, waiting for the broker between rooms,
    /// so a large home never has all its Home Assistant configs and values built and queued at once.
    func publishEverything() async {
        let users = store.home.users
        let info = BridgeInfo(version: Bridge.version, sourceKind: configuration.source.kind.rawValue,
                              users: users, startedAt: startedAt)
        if membership.isClustered { outbound.send(topics.instanceState(membership.index), "online") }
        outbound.send(topics.bridgeState, "online")
        outbound.send(topics.bridgeInfo, info.json.serialized)
        if let discovery { outbound.send(discovery.bridgeConfig.topic, discovery.bridgeConfig.payload.serialized) }
        let published = (discovery == nil ? 2 : 3) + (await publishRetained(users: { _ in true }))
        // Logged once the broker has them (or after 2 s), so whoever subscribes after this line
        // gets them as retained messages.
        _ = await broker.waitForPublished(timeout: 2)
        logger.info("published retained state", ["messages": String(published)])
    }

    /// The retained state of the owned users `including` picks: after a connect, every owned user;
    /// after a lease round, the users just taken over (docs/scaling.md, "Leases").
    func publishRetained(users including: (String) -> Bool) async -> Int {
        var published = 0
        for user in store.home.users where including(user.id) && ownership.owns(user.id) {
            for config in discovery?.userConfigs(user: user) ?? [] {
                outbound.send(config.topic, config.payload.serialized)
                published += 1
            }
            for room in user.rooms {
                await broker.waitForBacklog(below: Self.backlogLimit)
                if Task.isCancelled { return published }
                published += publishRetained(user: user, room: room)
            }
        }
        return published
    }

    /// One room's retained messages: its Home Assistant configs first (so Home Assistant has each
    /// entity when its state arrives), its values and room JSON, and its availability.
    private func publishRetained(user: User, room: Room) -> Int {
        let key = RoomKey(user: user.id, room: room.id)
        let (home, offline) = store.read { ($0.home, $0.offline.contains(key)) }
        var messages: [(String, String)] = discovery?.configs(user: user, room: room, home: home).map {
            ($0.topic, $0.payload.serialized)
        } ?? []
        let current = home.values(in: key)
        var values: [(String, String)] = home.sensors(of: room, user: user.id).compactMap { sensor in
            current[sensor].map { (topics.sensor(user: user.id, room: room.id, sensor: sensor), $0.mqttPayload) }
        }
        values.append((topics.room(user: user.id, room: room.id),
                       String(decoding: roomDocuments.document(room, user: user.id, in: home).bytes, as: UTF8.self)))
        tracker.withLock { tracker in
            let now = self.now
            for (topic, payload) in values { tracker.markPublished(topic: topic, payload: payload, now: now) }
            messages += values
            // Every room's, which its Home Assistant entities follow (README, "Home Assistant").
            messages.append((topics.availability(user: user.id, room: room.id), offline ? "offline" : "online"))
            for (topic, payload) in messages { outbound.send(topic, payload) }
        }
        return messages.count
    }

    // MARK: Rooms that changed while running

    /// Announces what changed in the rooms (README, "Managing the home"): the retained topics and
    /// Home Assistant configs of rooms and sensors that went are cleared (an empty retained
    /// message), rooms that came or changed are published whole, as after a connect, and
    /// `bridge/info` is sent again. `old` is the home before the change; the store has the new one.
    /// Returns the number of messages sent.
    @discardableResult
    func announce(_ diff: LayoutDiff, old: Home) -> Int {
        let new = store.home
        var count = 0
        var cleared: [String] = []
        for (user, room) in diff.removed where ownership.owns(user.id) {
            cleared += retainedTopics(user: user, room: room, in: old)
        }
        for change in diff.changed where ownership.owns(change.user.id) {
            let kept = Set(retainedTopics(user: change.user, room: change.new, in: new))
            cleared += retainedTopics(user: change.user, room: change.old, in: old).filter { !kept.contains($0) }
        }
        tracker.withLock { tracker in
            for topic in cleared {
                tracker.forget(topic: topic)
                outbound.send(topic, "")
            }
        }
        count += cleared.count
        for (user, room) in diff.added where ownership.owns(user.id) {
            count += publishRetained(user: user, room: room)
        }
        for change in diff.changed where ownership.owns(change.user.id) {
            count += publishRetained(user: change.user, room: change.new)
        }
        let info = BridgeInfo(version: Bridge.version, sourceKind: configuration.source.kind.rawValue,
                              users: new.users, startedAt: startedAt)
        outbound.send(topics.bridgeInfo, info.json.serialized)
        return count + 1
    }

    /// Every retained topic the bridge publishes for a room: its Home Assistant configs, each
    /// sensor's value, the room's JSON and its availability.
    private func retainedTopics(user: User, room: Room, in home: Home) -> [String] {
        (discovery?.configs(user: user, room: room, home: home).map(\.topic) ?? [])
            + home.sensors(of: room, user: user.id).map { topics.sensor(user: user.id, room: room.id, sensor: $0) }
            + [topics.room(user: user.id, room: room.id), topics.availability(user: user.id, room: room.id)]
    }

    /// Cluster: another instance went offline without saying so for its rooms (it was killed or
    /// lost its connection), so the rooms it acted for, as the database says now when by lease,
    /// are announced unavailable on its behalf.
    func announceRoomsOffline(ofInstance instance: Int) -> Int {
        var count = 0
        let owner = ownership.currentOwners()
        for user in store.home.users where owner(user.id) == instance {
            for room in user.rooms {
                outbound.send(topics.availability(user: user.id, room: room.id), "offline")
                count += 1
            }
        }
        return count
    }

    // MARK: Shutdown

    /// Says `offline` (a cluster's `bridge/state` only when no other instance is online) and
    /// waits up to 2 s for the broker to acknowledge; the connection is closed after this.
    func shutdown() async {
        if membership.isClustered { outbound.send(topics.instanceState(membership.index), "offline", qos: 1) }
        if !othersOnline() { outbound.send(topics.bridgeState, "offline", qos: 1) }
        guard broker.isConnected else { return }
        if !(await broker.waitForPublished(timeout: 2)) {
            logger.warning("broker did not acknowledge everything before shutdown")
        }
    }
}
