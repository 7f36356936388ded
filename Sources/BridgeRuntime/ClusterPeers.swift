import BridgeCore
import BridgeMQTT
import Foundation
import Synchronization

/// Cluster (issue #11): what one instance knows and does about the others.
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
/// the token from then on.
final class ClusterPeers: Sendable {
    private let membership: ClusterMembership
    private let topics: Topics
    private let controller: HomeController
    private let sessions: SessionService
    private let logger: Logger
    private let presence: MQTTClient
    /// Instances other than this one last seen `online`.
    private let online = Mutex<Set<Int>>([])
    private let stopping = Atomic<Bool>(false)

    init(configuration: BridgeConfiguration, broker: BrokerURL, controller: HomeController, sessions: SessionService,
         logger: Logger) throws {
        membership = configuration.cluster.membership
        topics = controller.topics
        self.controller = controller
        self.sessions = sessions
        self.logger = logger
        var presenceConfiguration = try Bridge.mqttConfiguration(configuration, broker: broker, logger: logger)
        presenceConfiguration.clientID = configuration.clientID + "-presence"
        presenceConfiguration.will = .init(topic: controller.topics.bridgeState, payload: Array("offline".utf8), qos: 1,
                                           retain: true)
        presenceConfiguration.cleanSession = true
        presence = try MQTTClient(configuration: presenceConfiguration)
        sessions.onRevoke { [controller] revocation in
            controller.publish(controller.topics.revokedSession(revocation.id), String(revocation.expiresAt))
        }
    }

    /// Connects the presence connection (it only holds the will; it never publishes).
    func start() throws {
        try presence.start()
        let presence = presence
        Task { for await _ in presence.events {} }
    }

    /// Called first thing at shutdown: from now on an `offline` is ours to say, not to correct.
    func beginShutdown() {
        stopping.store(true, ordering: .relaxed)
    }

    /// Disconnects the presence connection cleanly, so its will is not published.
    func stop() {
        presence.stop()
    }

    /// Whether any other instance is online, as far as this one has seen.
    var othersOnline: Bool { online.withLock { !$0.isEmpty } }

    /// Handles the cluster's state topics; returns `false` for any other message.
    func handle(_ message: MQTTMessage) -> Bool {
        if message.topic == topics.bridgeState {
            if message.text == "offline", !stopping.load(ordering: .relaxed) {
                // Another instance's presence will (it died): we are still here.
                controller.publish(topics.bridgeState, "online")
            }
            return true
        }
        if let id = topics.parseRevokedSession(message.topic) {
            revoke(id: id, message: message)
            return true
        }
        guard let instance = topics.parseInstanceState(message.topic) else { return false }
        // Our own state: we publish `online` at every connect, which replaces an old `offline`.
        guard instance != membership.index else { return true }
        guard instance < membership.instances else {
            logger.warning("a bridge instance outside cluster.instances is publishing on this base topic",
                           ["topic": message.topic, "instances": String(membership.instances)])
            return true
        }
        let isOnline = message.text == "online"
        let (changed, announce) = online.withLock { set -> (Bool, Bool) in
            let changed = isOnline ? set.insert(instance).inserted : set.remove(instance) != nil
            let lowest = set.union([membership.index]).min() == membership.index
            return (changed, lowest)
        }
        guard !isOnline else {
            if changed { logger.info("cluster instance online", ["instance": String(instance)]) }
            return true
        }
        // An `offline` retained from before we started counts too: nobody may have announced it.
        guard changed || message.retain, !stopping.load(ordering: .relaxed) else { return true }
        logger.warning("cluster instance offline", ["instance": String(instance)])
        if announce {
            let rooms = controller.announceRoomsOffline(ofInstance: instance)
            logger.info("announced the offline instance's rooms unavailable",
                        ["instance": String(instance), "rooms": String(rooms)])
        }
        return true
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
            controller.publish(message.topic, "")
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
