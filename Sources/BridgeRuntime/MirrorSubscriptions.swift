import BridgeCore
import BridgeMQTT
import Foundation
import Synchronization

/// Cluster (docs/scaling.md): the state of users this instance does not own, read from the
/// broker's retained topics when someone asks for it. Subscribing to every user's readings all
/// the time would have each instance receive nearly everything the cluster publishes, so an
/// instance would cost about what one bridge with every room costs; instead a user's topics are
/// subscribed (through the router, which routes them here) when an HTTP request or an event
/// stream needs them, and released after `cluster.mirror_idle` seconds unused.
final class MirrorSubscriptions: BridgeFeature {
    let name = "cluster-mirrors"

    private struct Entry {
        var lastUsed: ContinuousClock.Instant
        /// Sensors heard from since subscribing: the first answer waits until all have arrived.
        var heard: Set<String> = []
        var expected: Int
        let ready = Rendezvous<Bool>()
    }

    private let router: MessageRouter
    private let controller: HomeController
    private let events: EventHub
    private let topics: Topics
    private let logger: Logger
    private let idle: Duration
    /// How long a first request waits for the retained values (they normally take milliseconds).
    private let firstWait: Double
    private let entries = Mutex<[String: Entry]>([:])

    init(router: MessageRouter, controller: HomeController, events: EventHub, topics: Topics, logger: Logger,
         idle: Duration = .seconds(600), firstWait: Double = 1) {
        self.router = router
        self.controller = controller
        self.events = events
        self.topics = topics
        self.logger = logger
        self.idle = idle
        self.firstWait = firstWait
    }

    /// Makes sure a user's state is being mirrored, subscribing if needed, and waits (blocking the
    /// caller: libmicrohttpd's thread, never async code) until the user's retained values arrived.
    func ensure(user userID: String) {
        guard !controller.ownership.owns(userID), let user = controller.store.home.user(id: userID) else { return }
        let now = ContinuousClock.now
        let (isNew, ready) = entries.withLock { entries -> (Bool, Rendezvous<Bool>) in
            if let entry = entries[userID] {
                entries[userID]?.lastUsed = now
                return (false, entry.ready)
            }
            let entry = Entry(lastUsed: now, expected: user.rooms.reduce(0) { $0 + $1.sensors.count })
            entries[userID] = entry
            if entry.expected == 0 { entry.ready.deliver(true) }
            return (true, entry.ready)
        }
        if isNew {
            // QoS 0: a burst of retained values is never capped by the broker's per-client queue
            // (mosquitto's max_queued_messages), and the next reading replaces a lost one.
            for filter in topics.mirrorTopics(of: user) {
                do { try router.subscribe(filter, qos: 0, for: self) } catch {
                    logger.warning("cannot subscribe to another instance's user", ["user": userID,
                                                                                  "error": error.description])
                }
            }
        }
        if !ready.isDelivered { _ = ready.wait(timeout: firstWait) }
    }

    /// A reading or an event of a mirrored user.
    func handle(_ message: MQTTMessage) {
        if let user = topics.parseEventsTopic(message.topic) {
            relayEvent(message, user: user)
            return
        }
        // Our own readings would come back too, were we subscribed to them: nothing to do.
        guard let parsed = topics.parseSensorTopic(message.topic), !controller.ownership.owns(parsed.user),
              !message.payload.isEmpty
        else { return }
        guard let user = controller.store.home.user(id: parsed.user), user.rooms.contains(where: { $0.id == parsed.room })
        else {
            logger.debug("ignored a reading for a user or room this config does not have", ["topic": message.topic])
            return
        }
        let sensor = SensorKind.named(parsed.sensor)
        guard let value = SensorValue.parse(message.text, for: sensor) else {
            logger.warning("ignored a reading from another instance that does not parse",
                           ["topic": message.topic, "payload": String(message.text.prefix(40))])
            return
        }
        // Not recorded: the owner keeps the user's history, and the history route asks it.
        controller.mirror(Reading(user: parsed.user, room: parsed.room, sensor: sensor, value: value))
        heard(user: parsed.user, room: parsed.room, sensor: parsed.sensor)
    }

    /// An event the owner published for a user this instance does not own: passed on to that
    /// user's event streams here, as it came.
    private func relayEvent(_ message: MQTTMessage, user: String) {
        guard !controller.ownership.owns(user), controller.store.home.user(id: user) != nil else { return }
        guard let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
              let type = object["type"] as? String, ServerSentEvents.event(type, json: message.text) != nil
        else {
            logger.warning("ignored an event from another instance that is not a JSON event",
                           ["topic": message.topic, "payload": String(message.text.prefix(40))])
            return
        }
        controller.publishEvent(user: user, .relayed(type: type, json: message.text))
    }

    private func heard(user: String, room: String, sensor: String) {
        let ready = entries.withLock { entries -> Rendezvous<Bool>? in
            guard var entry = entries[user], entry.heard.count < entry.expected else { return nil }
            entry.heard.insert(room + "/" + sensor)
            entries[user] = entry
            return entry.heard.count >= entry.expected ? entry.ready : nil
        }
        ready?.deliver(true)
    }

    /// Users mirrored now (for the log and tests).
    var count: Int { entries.withLock { $0.count } }

    /// Releases users nobody asked for within `idle` (those with an open event stream stay), every
    /// 30 s, until cancelled.
    func run() async {
        let interval = min(Duration.seconds(30), idle)
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { break }
            let cutoff = ContinuousClock.now - idle
            let idleUsers = entries.withLock { entries -> [String] in
                let idleUsers = entries.filter { $0.value.lastUsed < cutoff && !events.hasStreams(user: $0.key) }
                    .map(\.key)
                for user in idleUsers { entries[user] = nil }
                return idleUsers
            }
            for userID in idleUsers {
                guard let user = controller.store.home.user(id: userID) else { continue }
                for filter in topics.mirrorTopics(of: user) { router.unsubscribe(filter, for: self) }
            }
            if !idleUsers.isEmpty {
                logger.debug("stopped mirroring idle users", ["users": String(idleUsers.count)])
            }
        }
    }
}
