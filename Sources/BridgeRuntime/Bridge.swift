import BridgeCore
import BridgeCrypto
import BridgeHTTP
import BridgeMQTT
import BridgeStorage
import Foundation

/// The running bridge: simulated readings out to MQTT, light commands in, the same state served
/// over HTTP. `run()` works until its task is cancelled, then shuts down cleanly.
public final class Bridge: Sendable {
    /// The version reported by `--version`, `bridge/info` and Home Assistant.
    public static let version = "0.1.0"

    private let configuration: BridgeConfiguration
    private let logger: Logger
    private let controller: HomeController
    private let mqtt: MQTTClient
    private let http: HTTPServer
    private let history: HistoryStore
    private let recorder: HistoryRecorder
    private let scheduler: AlarmScheduler
    private let restSource: RestSource?
    private let sweep: DiscoverySweep
    private let brokerAddress: String
    private let startedAt = Date()

    /// Sets the bridge up (opens the database) without connecting or listening yet.
    /// - Parameters:
    ///   - broker: where to connect; the embedded broker's address when `mqtt.url` is not set.
    public init(configuration: BridgeConfiguration, broker: BrokerURL, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        brokerAddress = broker.description
        mqtt = try MQTTClient(configuration: Bridge.mqttConfiguration(configuration, broker: broker, logger: logger))
        let database: Database
        do {
            database = try Database(path: configuration.storage.path)
        } catch {
            throw RuntimeError("cannot open storage.path \(configuration.storage.path): \(error.description)")
        }
        let sessions = SessionStore(database: database)
        if let purged = try? sessions.purgeExpired(now: Date()), purged > 0 {
            logger.info("removed expired sessions", ["count": String(purged)])
        }
        let upstream = configuration.source.kind == .rest ? UpstreamClient(source: configuration.source) : nil
        history = HistoryStore(database: database)
        recorder = HistoryRecorder(store: history, logger: logger)
        controller = HomeController(configuration: configuration, logger: logger, mqtt: mqtt, history: recorder,
                                    events: EventHub(),
                                    upstream: configuration.source.lightsCommand.path == nil ? nil : upstream,
                                    startedAt: startedAt)
        if let upstream {
            restSource = RestSource(configuration: configuration, controller: controller, client: upstream, logger: logger)
        } else {
            restSource = nil
        }
        sweep = DiscoverySweep(identity: HomeAssistantDiscovery(
            prefix: configuration.homeAssistant.prefix, topics: Topics(base: configuration.mqtt.baseTopic),
            version: Bridge.version, sourceKind: configuration.source.kind.rawValue))
        let schedule = AlarmSchedule(
            timeZone: configuration.scheduler.timezone.flatMap(TimeZone.init(identifier:)) ?? .current,
            grace: configuration.scheduler.grace
        )
        let alarms = AlarmStore(database: database)
        scheduler = AlarmScheduler(store: alarms, schedule: schedule, controller: controller, logger: logger)
        var dashboard: (@Sendable (String) -> HTTPResponse?)?
        if let files = StaticFiles(root: configuration.http.webRoot) {
            dashboard = { path in files.response(for: path) }
        }
        let routes = HTTPRoutes(
            legacyRoutes: configuration.http.legacyRoutes,
            loginGate: LoginGate(
                verifyPassword: { password, hash in PasswordHasher.verify(password: password, userHash: hash) },
                now: { Date().timeIntervalSinceReferenceDate }
            ),
            sessions: Bridge.sessionServices(sessions, ttl: configuration.http.sessionTTL, events: controller.events,
                                             logger: logger),
            alarms: DatabaseAlarms(store: alarms),
            history: DatabaseHistory(store: history),
            schedule: schedule,
            openEvents: { [controller] user, token, sink in
                controller.events.open(user: user, tokenHash: SessionToken.hash(token), sink: sink)
            },
            staticFiles: dashboard,
            switchLight: { [controller] user, room, command in
                controller.commandAndWait(command, user: user, room: room, source: "api")
            }
        )
        let store = controller.store
        let mqtt = mqtt
        let brokerAddress = brokerAddress
        let startedAt = startedAt
        http = HTTPServer(configuration: Bridge.httpConfiguration(configuration.http)) { request in
            routes.respond(
                to: request,
                home: { store.home },
                health: {
                    HTTPRoutes.Health(
                        mqttConnected: mqtt.isConnected,
                        mqttProblem: mqtt.lastProblem,
                        broker: brokerAddress,
                        uptimeSeconds: Int(Date().timeIntervalSince(startedAt)),
                        mqttQueued: mqtt.queuedMessages,
                        mqttDropped: mqtt.droppedMessages
                    )
                }
            )
        }
    }

    /// The port the HTTP server listens on (useful when `http.port` is 0).
    public var httpPort: Int { http.port }

    /// Sessions in the database; tokens are stored only as hashes. Storage failures are logged
    /// and answered as 500 by the routes.
    static func sessionServices(_ sessions: SessionStore, ttl: Double, events: EventHub, logger: Logger)
        -> SessionServices
    {
        SessionServices(
            create: { userID in
                let token = SessionToken.generate()
                let now = Date()
                do {
                    try sessions.create(tokenHash: SessionToken.hash(token), userID: userID, now: now,
                                        expiresAt: now.addingTimeInterval(ttl))
                } catch {
                    logger.error("cannot store a session", ["error": "\(error)"])
                    throw error
                }
                return token
            },
            resolve: { token in
                do {
                    return try sessions.userID(tokenHash: SessionToken.hash(token), now: Date())
                } catch {
                    logger.error("cannot read sessions", ["error": "\(error)"])
                    throw error
                }
            },
            revoke: { token in
                do {
                    try sessions.revoke(tokenHash: SessionToken.hash(token))
                    events.close(tokenHash: SessionToken.hash(token))
                } catch {
                    logger.error("cannot revoke a session", ["error": "\(error)"])
                    throw error
                }
            }
        )
    }

    static func mqttConfiguration(_ configuration: BridgeConfiguration, broker: BrokerURL,
                                  logger: Logger? = nil) throws -> MQTTConfiguration {
        let mqtt = configuration.mqtt
        var password = mqtt.password
        if let file = mqtt.passwordFile {
            do {
                password = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .newlines)
            } catch {
                throw RuntimeError("cannot read mqtt.password_file \(file): \(error.localizedDescription)")
            }
        }
        let tls: MQTTConfiguration.TLS? = broker.tls || mqtt.tlsCA != nil
            ? MQTTConfiguration.TLS(caFile: mqtt.tlsCA, certFile: mqtt.tlsCert, keyFile: mqtt.tlsKey,
                                    verifyHostname: mqtt.tlsVerify)
            : nil
        return MQTTConfiguration(
            host: broker.host,
            port: broker.port,
            clientID: mqtt.effectiveClientID,
            username: mqtt.username,
            password: password,
            keepalive: mqtt.keepalive,
            will: .init(topic: Topics(base: mqtt.baseTopic).bridgeState, payload: Array("offline".utf8), qos: 1,
                        retain: true),
            tls: tls,
            reconnectMin: mqtt.reconnectMin,
            reconnectMax: mqtt.reconnectMax,
            maxQueued: mqtt.maxQueued,
            // Persistent: QoS 1 commands sent while the bridge reconnects are delivered when it is
            // back (each start still begins with a fresh session; see MQTTConfiguration).
            cleanSession: false,
            onNotice: { [logger = logger ?? Logger(level: configuration.log.level)] notice in
                switch notice {
                case .queueFull(let capacity):
                    logger.warning("offline queue full (mqtt.max_queued); dropping the oldest superseded readings first",
                                   ["max_queued": String(capacity)])
                case .queueFlushed(let queued, let dropped, let total) where dropped > 0:
                    logger.warning("delivering readings queued while the broker was away; some were dropped",
                                   ["queued": String(queued), "dropped": String(dropped), "dropped_total": String(total)])
                case .queueFlushed(let queued, _, _):
                    logger.info("delivering readings queued while the broker was away", ["queued": String(queued)])
                case .deadConnection(let silence, let keepalive):
                    logger.warning("no answer from broker; closing the dead connection",
                                   ["silent_s": String(format: "%.1f", silence), "keepalive": String(keepalive)])
                case .noConnack(let seconds):
                    logger.warning("broker took the connection but did not answer CONNECT",
                                   ["timeout_s": String(format: "%.0f", seconds)])
                }
            }
        )
    }

    static func httpConfiguration(_ http: BridgeConfiguration.HTTP) -> HTTPServerConfiguration {
        HTTPServerConfiguration(
            bindAddress: http.bind,
            port: http.port,
            maxConnections: http.maxConnections,
            maxConnectionsPerAddress: http.maxConnectionsPerAddress,
            connectionTimeoutSeconds: Int(http.connectionTimeout.rounded(.up)),
            maxHeaderBytes: http.maxHeaderBytes,
            maxBodyBytes: http.maxBodyBytes,
            threadPoolSize: http.threads
        )
    }

    // MARK: Running

    /// Serves HTTP, connects to the broker and runs the source until the task is cancelled; then
    /// publishes `offline`, disconnects and stops serving.
    public func run() async throws {
        try http.start()
        logger.info("HTTP listening", ["bind": configuration.http.bind, "port": String(http.port)])
        if configuration.http.legacyRoutes {
            logger.warning("legacy seed routes are on: /login/:username/:password carries passwords in URLs; "
                + "turn http.legacy_routes off unless an old app needs them")
        }
        var simulator: Simulator?
        if restSource == nil {
            let simulated = Simulator(users: configuration.users, seed: seed())
            controller.record(simulated.initialReadings(), publish: false)
            simulator = simulated
        } else {
            // Polled rooms start with their lights off until the upstream or the database says otherwise.
            controller.record(configuration.users.flatMap { user in
                user.rooms.filter { $0.sensors.contains(.lights) }.map {
                    Reading(user: user.id, room: $0.id, sensor: .lights, value: .binary(false))
                }
            }, publish: false)
        }
        do {
            let restored = controller.restore(try history.lastValues())
            if restored > 0 { logger.info("restored last values from the database", ["values": String(restored)]) }
        } catch {
            logger.error("cannot read the last values; starting from defaults", ["error": error.description])
        }
        try mqtt.subscribe(controller.topics.commandFilter, qos: configuration.mqtt.qos)
        try mqtt.subscribe(sweep.filter, qos: 0)
        if let discovery = controller.discovery {
            try mqtt.subscribe(discovery.statusTopic, qos: 0)
        }
        try mqtt.start()
        logger.info("connecting to broker", ["broker": brokerAddress, "client_id": configuration.mqtt.effectiveClientID])

        await withDiscardingTaskGroup { group in
            group.addTask { await self.handleEvents() }
            group.addTask { await self.recorder.run(interval: 1) }
            group.addTask { await self.scheduler.run() }
            group.addTask { await self.pruneHistory() }
            group.addTask { await self.controller.events.run(interval: 15) }
            if let restSource {
                group.addTask { await restSource.run() }
            }
            if let simulator {
                group.addTask { await self.simulate(simulator) }
            }
        }
        await shutdown()
    }

    /// Steps the simulator every `source.interval` (as fast as it can at 0) until cancelled.
    private func simulate(_ start: Simulator) async {
        var simulator = start
        let interval = configuration.source.interval
        while !Task.isCancelled {
            if interval > 0 {
                do { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) } catch { break }
            } else {
                await Task.yield()
            }
            // A step waits for the broker rather than queue without end (interval 0, a large home).
            await mqtt.waitForBacklog(below: HomeController.backlogLimit)
            controller.record(simulator.step(), publish: true)
        }
    }

    /// Home Assistant came (back) online: after a short random delay, so it has subscribed, it
    /// gets every config and state again, and no entity stays unavailable.
    private func homeAssistantStatus(_ message: MQTTMessage) {
        guard message.text == "online" else { return }
        let delay = Int.random(in: 1000...3000)
        logger.info("Home Assistant is online; republishing discovery and states", ["delay_ms": String(delay)])
        Task {
            try? await Task.sleep(for: .milliseconds(delay))
            controller.republishEverything()
        }
    }

    /// Clears this bridge's retained discovery configs for entities it no longer has.
    private func sweepStaleConfigs() async {
        try? await Task.sleep(for: DiscoverySweep.window)
        let current = controller.discovery?.configTopics(home: controller.store.home) ?? []
        let stale = sweep.finish(current: current)
        for topic in stale {
            do {
                try mqtt.publish(topic: topic, payload: [], qos: configuration.mqtt.qos, retain: true)
            } catch {
                logger.warning("cannot clear a stale discovery config", ["topic": topic, "error": error.description])
            }
        }
        if !stale.isEmpty { logger.info("cleared stale Home Assistant configs", ["count": String(stale.count)]) }
        try? mqtt.unsubscribe(sweep.filter)
    }

    /// Deletes readings older than `storage.retention_days`, at start and then hourly.
    private func pruneHistory() async {
        while !Task.isCancelled {
            let cutoff = Date().addingTimeInterval(-Double(configuration.storage.retentionDays) * 86_400)
            do {
                let pruned = try history.prune(before: cutoff)
                if pruned > 0 { logger.info("pruned old history", ["rows": String(pruned)]) }
            } catch {
                logger.error("cannot prune history", ["error": error.description])
            }
            do { try await Task.sleep(for: .seconds(3600)) } catch { break }
        }
    }

    private func seed() -> UInt64 {
        if let seed = configuration.source.seed { return seed }
        let seed = UInt64.random(in: 0...UInt64.max)
        logger.info("simulating with a random seed; set source.seed to repeat this run", ["seed": String(seed)])
        return seed
    }

    private func shutdown() async {
        logger.info("shutting down")
        do {
            try mqtt.publish(topic: controller.topics.bridgeState, text: "offline", qos: 1, retain: true)
            if !(await mqtt.waitForPublished(timeout: 2)) {
                logger.warning("broker did not acknowledge everything before shutdown")
            }
        } catch {
            logger.warning("could not publish offline state", ["error": error.description])
        }
        mqtt.stop()
        http.stop()
    }

    private func handleEvents() async {
        var wasConnected = false
        for await event in mqtt.events {
            switch event {
            case .connected:
                logger.info("connected to broker", ["broker": brokerAddress])
                wasConnected = true
                controller.republishEverything()
                if sweep.begin() {
                    Task { await self.sweepStaleConfigs() }
                }
            case .refused(let reason):
                // Retried with the same backoff as an unreachable broker, up to mqtt.reconnect_max.
                logger.error("broker refused: \(reason)", ["broker": brokerAddress, "attempt": String(mqtt.failedAttempts),
                                                          "retry_in_s": String(format: "%.1f", mqtt.nextAttemptDelay ?? 0)])
            case .disconnected(let unexpected, let reason):
                let retry = String(format: "%.1f", mqtt.nextAttemptDelay ?? 0)
                if unexpected, wasConnected {
                    logger.warning("lost connection to broker; reconnecting",
                                   ["broker": brokerAddress, "reason": reason, "retry_in_s": retry,
                                    "queued": String(mqtt.queuedMessages)])
                } else if unexpected {
                    logger.warning("cannot reach broker; retrying",
                                   ["broker": brokerAddress, "reason": reason, "attempt": String(mqtt.failedAttempts),
                                    "retry_in_s": retry, "queued": String(mqtt.queuedMessages),
                                    "dropped": String(mqtt.droppedMessages)])
                }
                wasConnected = false
            case .message(let message):
                if sweep.collect(message) { continue }
                if let discovery = controller.discovery, message.topic == discovery.statusTopic {
                    homeAssistantStatus(message)
                    continue
                }
                controller.handleCommand(message)
            }
        }
    }

}

/// A start-up problem outside any one library: names what went wrong.
public struct RuntimeError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
