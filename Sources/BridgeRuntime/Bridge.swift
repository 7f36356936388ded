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
    /// Cluster only: which instances are online, and the connection whose last will keeps
    /// `<base>/bridge/state` honest when the last instance dies.
    private let peers: ClusterPeers?
    /// Cluster only: every alarm on every instance.
    private let replication: AlarmReplication?
    /// Cluster only: the state of other instances' users, while HTTP clients ask for it.
    private let mirrors: MirrorSubscriptions?
    /// Cluster only: history read from the owner's database.
    private let clusterHistory: ClusterHistory?
    private let announced: AnnouncedConfigStore
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
        for file in StorageFiles.readableByOthers(databasePath: database.path) {
            logger.warning("storage readable by other users; it holds the token signing key: chmod go-rwx it",
                           ["file": file])
        }
        let upstream = configuration.source.kind == .rest ? UpstreamClient(source: configuration.source) : nil
        history = HistoryStore(database: database)
        recorder = HistoryRecorder(store: history, logger: logger)
        controller = HomeController(configuration: configuration, logger: logger, mqtt: mqtt, history: recorder,
                                    events: EventHub(limits: .init(perSession: configuration.http.maxStreamsPerToken,
                                                                   perUser: configuration.http.maxStreamsPerUser)),
                                    upstream: configuration.source.lightsCommand.path == nil ? nil : upstream,
                                    startedAt: startedAt)
        if let upstream {
            restSource = RestSource(configuration: configuration.owned, controller: controller, client: upstream,
                                    logger: logger)
        } else {
            restSource = nil
        }
        announced = AnnouncedConfigStore(database: database)
        sweep = DiscoverySweep(identity: HomeAssistantDiscovery(
            prefix: configuration.homeAssistant.prefix, topics: Topics(base: configuration.mqtt.baseTopic),
            version: Bridge.version, sourceKind: configuration.source.kind.rawValue))
        let schedule = AlarmSchedule(
            timeZone: configuration.scheduler.timezone.flatMap(TimeZone.init(identifier:)) ?? .current,
            grace: configuration.scheduler.grace
        )
        let alarms = AlarmStore(database: database)
        let replication = configuration.cluster.instances > 1
            ? AlarmReplication(store: alarms, controller: controller, logger: logger)
            : nil
        self.replication = replication
        scheduler = AlarmScheduler(store: alarms, schedule: schedule, controller: controller, replication: replication,
                                   logger: logger)
        var dashboard: (@Sendable (String) -> HTTPResponse?)?
        if let files = StaticFiles(root: configuration.http.webRoot) {
            dashboard = { path in files.response(for: path) }
        }
        let sessions = try SessionService(configuration: configuration, database: database, events: controller.events,
                                          logger: logger)
        peers = configuration.cluster.instances > 1
            ? try ClusterPeers(configuration: configuration, broker: broker, controller: controller, sessions: sessions,
                               logger: logger)
            : nil
        let mirrors = configuration.cluster.instances > 1
            ? MirrorSubscriptions(mqtt: mqtt, controller: controller, logger: logger,
                                  idle: .milliseconds(Int(configuration.cluster.mirrorIdle * 1000)))
            : nil
        self.mirrors = mirrors
        let clusterHistory = configuration.cluster.instances > 1
            ? ClusterHistory(local: DatabaseHistory(store: history), controller: controller,
                             timeout: configuration.cluster.commandTimeout, logger: logger)
            : nil
        self.clusterHistory = clusterHistory
        var routes = HTTPRoutes(
            legacyRoutes: configuration.http.legacyRoutes,
            loginGate: LoginGate(
                verifyPassword: { password, hash in PasswordHasher.verify(password: password, userHash: hash) },
                now: { Date().timeIntervalSinceReferenceDate },
                record: SecurityLog.recorder(logger)
            ),
            sessions: sessions.services,
            alarms: DatabaseAlarms(store: alarms, replication: replication),
            history: clusterHistory ?? DatabaseHistory(store: history),
            schedule: schedule,
            openEvents: { [controller] session in controller.events.open(session) },
            staticFiles: dashboard,
            switchLight: { [controller] user, room, command in
                controller.commandAndWait(command, user: user, room: room, source: "api")
            }
        )
        if let mirrors {
            routes.prepareUser = { user in mirrors.ensure(user: user) }
        }
        routes.allowedHosts = HostAllowList(configured: configuration.http.allowedHosts, bind: configuration.http.bind)
        routes.trustedProxies = configuration.http.trustedProxySet
        routes.securityLog = SecurityLog.recorder(logger)
        let finalRoutes = routes
        let store = controller.store
        let mqtt = mqtt
        let brokerAddress = brokerAddress
        let startedAt = startedAt
        http = HTTPServer(configuration: Bridge.httpConfiguration(configuration.http)) { request in
            finalRoutes.respond(
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
            clientID: configuration.clientID,
            username: mqtt.username,
            password: password,
            keepalive: mqtt.keepalive,
            // A cluster instance's will is its own state; ClusterPeers looks after `bridge/state`.
            will: .init(topic: configuration.cluster.instances > 1
                            ? Topics(base: mqtt.baseTopic).instanceState(configuration.cluster.index)
                            : Topics(base: mqtt.baseTopic).bridgeState,
                        payload: Array("offline".utf8), qos: 1, retain: true),
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
            requestHeadTimeoutSeconds: http.requestHeadTimeout,
            maxHeaderBytes: http.maxHeaderBytes,
            maxBodyBytes: http.maxBodyBytes,
            threadPoolSize: http.threads,
            tls: http.tlsCert.flatMap { cert in
                http.tlsKey.map { HTTPServerConfiguration.TLS(certificateFile: cert, keyFile: $0) }
            }
        )
    }

    // MARK: Running

    /// Serves HTTP, connects to the broker and runs the source until the task is cancelled; then
    /// publishes `offline`, disconnects and stops serving.
    public func run() async throws {
        try http.start()
        logger.info("HTTP listening", ["bind": configuration.http.bind, "port": String(http.port),
                                       "scheme": configuration.http.tlsCert == nil ? "http" : "https"])
        for warning in configuration.warnings {
            logger.warning("UNSAFE: " + warning)
        }
        if configuration.http.legacyRoutes {
            logger.warning("legacy seed routes are on: /login/:username/:password carries passwords in URLs; "
                + "turn http.legacy_routes off unless an old app needs them")
        }
        // Legal MQTT, but RabbitMQ's MQTT plugin maps topics to AMQP routing keys and back, so a
        // subscriber there gets '.' as '/' and '*' as '+': nobody's filter (nor this bridge's
        // command filter) matches the topics it then sees. A warning, as mosquitto is fine.
        let levels = [("mqtt.base_topic", configuration.mqtt.baseTopic),
                      ("homeassistant.prefix", configuration.homeAssistant.prefix)]
        for (key, value) in levels where value.contains(".") || value.contains("*") {
            logger.warning("\(key) contains '.' or '*', which RabbitMQ's MQTT plugin delivers as '/' or '+'; "
                + "choose one without them to use RabbitMQ (docs/brokers.md)", ["value": value])
        }
        var simulator: Simulator?
        if restSource == nil {
            // Only the users this instance owns: the others' owners simulate them.
            let simulated = Simulator(users: configuration.owned.users, seed: seed())
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
        if let peers {
            // QoS 0: mosquitto queues at most max_queued_messages (default 1,000) QoS 1 messages per
            // client and drops the rest; QoS 0 is not capped, and these are retained or rare.
            let topics = controller.topics
            // Each instance's state by its exact topic, so that brokers which give retained messages
            // only to exact subscriptions (RabbitMQ) still tell a new instance who is up.
            for index in 0..<configuration.cluster.instances {
                try mqtt.subscribe(topics.instanceState(index), qos: 0)
            }
            for filter in (clusterHistory?.filters ?? []) + [topics.availabilityFilter, topics.revokedSessionFilter,
                           topics.alarmFilter] {
                try mqtt.subscribe(filter, qos: 0)
            }
            try mqtt.subscribe(controller.topics.bridgeState, qos: configuration.mqtt.qos)
            try peers.start()
            logger.info("cluster instance", ["index": String(configuration.cluster.index),
                                             "instances": String(configuration.cluster.instances),
                                             "owned_users": String(configuration.owned.users.count),
                                             "users": String(configuration.users.count)])
        }
        try mqtt.start()
        logger.info("connecting to broker", ["broker": brokerAddress, "client_id": configuration.clientID])

        await withDiscardingTaskGroup { group in
            group.addTask { await self.handleEvents() }
            group.addTask { await self.recorder.run(interval: 1) }
            group.addTask { await self.scheduler.run() }
            group.addTask { await self.pruneHistory() }
            group.addTask { await self.controller.events.run(interval: 15) }
            if let mirrors {
                group.addTask { await mirrors.run() }
            }
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
        var remembered: Set<String> = []
        do {
            remembered = try announced.topics()
        } catch {
            logger.warning("cannot read the announced discovery configs", ["error": error.description])
        }
        let stale = sweep.finish(current: current, remembered: remembered)
        for topic in stale {
            do {
                try mqtt.publish(topic: topic, payload: [], qos: configuration.mqtt.qos, retain: true)
            } catch {
                logger.warning("cannot clear a stale discovery config", ["topic": topic, "error": error.description])
            }
        }
        if !stale.isEmpty { logger.info("cleared stale Home Assistant configs", ["count": String(stale.count)]) }
        do {
            try announced.replace(with: current)
            logger.info("recorded the announced Home Assistant configs", ["count": String(current.count)])
        } catch {
            logger.warning("cannot record the announced discovery configs", ["error": error.description])
        }
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
        peers?.beginShutdown()
        do {
            if peers != nil {
                try mqtt.publish(topic: controller.topics.instanceState(configuration.cluster.index), text: "offline",
                                 qos: 1, retain: true)
            }
            // A cluster says `offline` only when its last instance goes.
            if peers?.othersOnline ?? false == false {
                try mqtt.publish(topic: controller.topics.bridgeState, text: "offline", qos: 1, retain: true)
            }
            if !(await mqtt.waitForPublished(timeout: 2)) {
                logger.warning("broker did not acknowledge everything before shutdown")
            }
        } catch {
            logger.warning("could not publish offline state", ["error": error.description])
        }
        mqtt.stop()
        peers?.stop()
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
                if let peers, peers.handle(message) || replication?.handle(message) == true
                    || clusterHistory?.handle(message) == true || mirrors?.handle(message) == true
                {
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
