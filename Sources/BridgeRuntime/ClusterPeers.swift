import BridgeCore
import BridgeMQTT
import Foundation
import Synchronization

/// Cluster (docs/scaling.md): what one instance knows and does about the others.
///
/// Each instance's last will is its own `<base>/bridge/<i>/state`. When an instance goes offline
/// without taking its rooms with it, the lowest-numbered instance still online announces those
/// rooms `offline` on their availability topics (their owner corrects that if it was only
/// restarting). `<base>/bridge/state` means "some instance is online": a second, idle connection
/// per instance has `offline` there as its will, and any instance still running answers such an
/// `offline` with `online` again, so only the last instance to die leaves it `offline`.
///
/// A logout on one instance is published retained on `<base>/bridge/revoked/<id>` until the token
/// expires; every instance (one that was down at the time included, when it subscribes) refuses
/// the token from then on. Instances sharing a PostgreSQL database read revocations there instead
/// (`SessionService`), so nothing is published.
///
/// Another instance may also announce this instance's rooms `offline` (it saw an old `offline` of
/// ours while we were restarting): that is corrected, unless the room really is offline.
final class ClusterPeers: BridgeFeature {
    let name = "cluster-peers"
    private let membership: ClusterMembership
    private let topics: Topics
    private let qos: Int
    private let store: HomeStore
    private let publisher: StatePublisher
    private let sessions: SessionService
    private let logger: Logger
    private let presence: MQTTClient
    /// Instances other than this one last seen `online`.
    private let online: OnlineInstances
    private let stopping = Atomic<Bool>(false)
    private let replicatesRevocations: Bool
    /// Instances seen going offline whose rooms this instance announces `offline`: in `run()`, as
    /// by lease who acted for which user is read from the database, never on the event loop.
    private let wentOffline = CoalescedSet<Int>()

    init(configuration: BridgeConfiguration, broker: BrokerURL, store: HomeStore, publisher: StatePublisher,
         sessions: SessionService, online: OnlineInstances, replicatesRevocations: Bool, logger: Logger) throws {
        self.online = online
        self.replicatesRevocations = replicatesRevocations
        membership = configuration.cluster.membership
        topics = Topics(base: configuration.mqtt.baseTopic)
        qos = configuration.mqtt.qos
        self.store = store
        self.publisher = publisher
        self.sessions = sessions
        self.logger = logger
        var presenceConfiguration = try Bridge.mqttConfiguration(configuration, broker: broker, logger: logger)
        presenceConfiguration.clientID = configuration.clientID + "-presence"
        presenceConfiguration.will = .init(topic: topics.bridgeState, payload: Array("offline".utf8), qos: 1,
                                           retain: true)
        presenceConfiguration.cleanSession = true
        presence = try MQTTClient(configuration: presenceConfiguration)
        let topics = topics
        guard replicatesRevocations else { return }
        sessions.onRevoke { [publisher] revocation in
            publisher.send(topics.revokedSession(revocation.id), String(revocation.expiresAt))
        }
    }

    /// QoS 0 for most: mosquitto queues at most max_queued_messages (default 1,000) QoS 1 messages
    /// per client and drops the rest; QoS 0 is not capped, and these are retained or rare. Each
    /// instance's state by its exact topic, so that brokers which give retained messages only to
    /// exact subscriptions (RabbitMQ) still tell a new instance who is up.
    var subscriptions: [MQTTSubscription] {
        (0..<membership.instances).map { MQTTSubscription(filter: topics.instanceState($0), qos: 0) }
            + [MQTTSubscription(filter: topics.availabilityFilter, qos: 0),
               MQTTSubscription(filter: topics.bridgeState, qos: qos)]
            + (replicatesRevocations ? [MQTTSubscription(filter: topics.revokedSessionFilter, qos: 0)] : [])
    }

    /// Connects the presence connection (it only holds the will; it never publishes) and drains
    /// its events until cancelled; announces the rooms of instances that went offline.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.announceOffline() }
            group.addTask { await self.holdPresence() }
        }
    }

    private func holdPresence() async {
        do {
            try presence.start()
        } catch {
            logger.error("cannot start the cluster presence connection", ["error": error.description])
            return
        }
        for await _ in presence.events {}
    }

    /// Announces the rooms of the instances that went offline, unless they came back meanwhile.
    private func announceOffline() async {
        await wentOffline.forEachBatch { instances in
            guard !stopping.load(ordering: .relaxed) else { return }
            for instance in instances.sorted() where !online.contains(instance) {
                let rooms = publisher.announceRoomsOffline(ofInstance: instance)
                logger.info("announced the offline instance's rooms unavailable",
                            ["instance": String(instance), "rooms": String(rooms)])
            }
        }
    }

    /// From now on an `offline` is ours to say, not to correct; the presence connection is
    /// disconnected cleanly, so its will is not published.
    func shutdown() async {
        stopping.store(true, ordering: .relaxed)
        presence.stop()
    }


    func handle(_ message: MQTTMessage) {
        if message.topic == topics.bridgeState {
            if message.text == "offline", !stopping.load(ordering: .relaxed) {
                // Another instance's presence will (it died): we are still here.
                publisher.send(topics.bridgeState, "online")
            }
            return
        }
        if let id = topics.parseRevokedSession(message.topic) {
            revoke(id: id, message: message)
            return
        }
        if let key = topics.parseAvailabilityTopic(message.topic) {
            correctAvailability(key, message: message)
            return
        }
        guard let instance = topics.parseInstanceState(message.topic) else { return }
        // Our own state: we publish `online` at every connect, which replaces an old `offline`.
        guard instance != membership.index else { return }
        guard instance < membership.instances else {
            logger.warning("a bridge instance outside cluster.instances is publishing on this base topic",
                           ["topic": message.topic, "instances": String(membership.instances)])
            return
        }
        let isOnline = message.text == "online"
        let changed = online.set(instance, online: isOnline)
        let announce = online.isLowest(membership.index)
        guard !isOnline else {
            if changed { logger.info("cluster instance online", ["instance": String(instance)]) }
            return
        }
        // An `offline` retained from before we started counts too: nobody may have announced it.
        guard changed || message.retain, !stopping.load(ordering: .relaxed) else { return }
        logger.warning("cluster instance offline", ["instance": String(instance)])
        if announce {
            wentOffline.add([instance])
        }
    }

    /// Another instance announced one of our rooms offline: corrected unless it really is.
    private func correctAvailability(_ key: RoomKey, message: MQTTMessage) {
        guard publisher.ownership.owns(key.user), message.text == "offline", !store.read({ $0.offline.contains(key) })
        else { return }
        publisher.send(message.topic, "online")
    }

    /// A logout another instance (or this one) published: refused here too; once the token has
    /// expired the retained message is cleared, so the broker doesn't collect them forever.
    private func revoke(id: String, message: MQTTMessage) {
        guard !message.payload.isEmpty else { return }
        guard let expiresAt = Int64(message.text) else {
            logger.warning("ignored a session revocation without an expiry", ["topic": message.topic])
            return
        }
        if Double(expiresAt) <= Date().timeIntervalSince1970 {
            publisher.send(message.topic, "")
            return
        }
        do {
            if try sessions.revokeRemote(id: id, expiresAt: expiresAt) {
                logger.info("session revoked by another instance", ["session": String(id.prefix(8))])
            }
        } catch {
            logger.error("cannot store a session revocation", ["error": error.description])
        }
    }
}
