import BridgeCore
import BridgeMQTT
import Foundation
import Synchronization

/// Cluster (issue #11): the state of users this instance does not own, read from the broker's
/// retained topics when someone asks for it. Subscribing to every user's readings all the time
/// would have each instance receive nearly everything the cluster publishes, so an instance would
/// cost about what one bridge with every room costs; instead a user's topics are subscribed when
/// an HTTP request (or an event stream) needs them and released after `idle` seconds unused.
final class MirrorSubscriptions: Sendable {
    private struct Entry {
        var lastUsed: ContinuousClock.Instant
        /// Sensors heard from since subscribing: the first answer waits until all have arrived.
        var heard: Set<String> = []
        var expected: Int
    }

    private let mqtt: MQTTClient
    private let controller: HomeController
    private let logger: Logger
    private let idle: Duration
    /// How long a first request waits for the retained values (they normally take milliseconds).
    private let firstWait: Duration
    private let entries = Mutex<[String: Entry]>([:])

    init(mqtt: MQTTClient, controller: HomeController, logger: Logger, idle: Duration = .seconds(600),
         firstWait: Duration = .seconds(1)) {
        self.mqtt = mqtt
        self.controller = controller
        self.logger = logger
        self.idle = idle
        self.firstWait = firstWait
    }

    /// Makes sure a user's state is being mirrored, subscribing if needed, and waits (blocking the
    /// caller: libmicrohttpd's thread, never async code) until the user's retained values arrived.
    func ensure(user userID: String) {
        guard !controller.membership.owns(userID), let user = controller.store.home.user(id: userID) else { return }
        let now = ContinuousClock.now
        let isNew = entries.withLock { entries -> Bool in
            if entries[userID] != nil {
                entries[userID]?.lastUsed = now
                return false
            }
            let expected = user.rooms.reduce(0) { $0 + $1.sensors.count }
            entries[userID] = Entry(lastUsed: now, expected: expected)
            return true
        }
        if isNew {
            // QoS 0: a burst of retained values is never capped by the broker's per-client queue
            // (mosquitto's max_queued_messages), and the next reading replaces a lost one.
            for filter in controller.topics.mirrorTopics(of: user) {
                do { try mqtt.subscribe(filter, qos: 0) } catch {
                    logger.warning("cannot subscribe to another instance's user", ["user": userID,
                                                                                  "error": error.description])
                }
            }
        }
        let deadline = now + firstWait
        while !isReady(userID), ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.002)
        }
    }

    /// Applies a reading of a mirrored user (`HomeController.mirror`) and notes it for a first
    /// request waiting for it; returns `false` for a message that is none of the mirror's.
    func handle(_ message: MQTTMessage) -> Bool {
        guard controller.mirror(message) else { return false }
        if let (user, room, sensor) = controller.topics.parseSensorTopic(message.topic) {
            heard(user: user, room: room, sensor: sensor)
        }
        return true
    }

    private func heard(user: String, room: String, sensor: String) {
        entries.withLock { entries in
            guard entries[user] != nil, entries[user]!.heard.count < entries[user]!.expected else { return }
            entries[user]!.heard.insert(room + "/" + sensor)
        }
    }

    private func isReady(_ user: String) -> Bool {
        entries.withLock { entries in entries[user].map { $0.heard.count >= $0.expected } ?? true }
    }

    /// Users mirrored now (for the log and tests).
    var count: Int { entries.withLock { $0.count } }

    /// Releases users nobody asked for within `idle` (those with an open event stream stay),
    /// every `interval`, until cancelled.
    func run(interval: Duration = .seconds(30)) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { break }
            let cutoff = ContinuousClock.now - idle
            let idleUsers = entries.withLock { entries -> [String] in
                let idleUsers = entries.filter { $0.value.lastUsed < cutoff && !controller.events.hasStreams(user: $0.key) }
                    .map(\.key)
                for user in idleUsers { entries[user] = nil }
                return idleUsers
            }
            for userID in idleUsers {
                guard let user = controller.store.home.user(id: userID) else { continue }
                for filter in controller.topics.mirrorTopics(of: user) { try? mqtt.unsubscribe(filter) }
            }
            if !idleUsers.isEmpty {
                logger.debug("stopped mirroring idle users", ["users": String(idleUsers.count)])
            }
        }
    }
}
