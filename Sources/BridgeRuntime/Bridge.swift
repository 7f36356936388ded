import BridgeCore
import BridgeHTTP
import BridgeMQTT
import BridgeStorage
import Foundation

/// The running bridge: builds the store, the MQTT connection, the HTTP server and the list of
/// features, routes each MQTT message to the features that subscribed to it, runs every feature
/// in one task group and shuts them down in reverse order (docs/architecture.md).
public final class Bridge: Sendable {
    /// The version reported by `--version`, `bridge/info` and Home Assistant.
    public static let version = "0.1.0"

    private let configuration: BridgeConfiguration
    private let logger: Logger
    private let mqtt: MQTTClient
    private let http: HTTPServer
    private let router: MessageRouter
    private let controller: HomeController
    private let source: any Source
    private let history: HistoryStore
    /// In start-up order; shut down in reverse.
    private let features: [any BridgeFeature]
    private let brokerAddress: String
    private let reloader: ConfigReloader

    /// Sets the bridge up (opens the database) without connecting or listening yet.
    /// - Parameters:
    ///   - broker: where to connect; the embedded broker's address when `mqtt.url` is not set.
    ///   - configFile: the config file's path, named when the API is asked to change one of its rooms.
    ///   - environment: the `SMARTHOME_*` variables, applied again when the file is reloaded.
    ///   - loaded: the configuration as the file and the environment gave it, before start-up filled
    ///     in the broker's account and the client id: what a reload compares the file with.
    public init(configuration fileConfiguration: BridgeConfiguration, broker: BrokerURL, logger: Logger,
                configFile: String = ConfigFile.defaultPath, environment: [String: String] = [:],
                loaded: BridgeConfiguration? = nil) throws {
        self.logger = logger
        brokerAddress = broker.description
        let startedAt = Date()
        let mqtt = try MQTTClient(configuration: Bridge.mqttConfiguration(fileConfiguration, broker: broker, logger: logger))
        self.mqtt = mqtt
        let database = try Database.open(fileConfiguration)
        // Users an admin made through the API join the config's (README, "Admins and unbound devices");
        // a cluster has only the config's, which every instance reads alike.
        let clustered = fileConfiguration.cluster.instances > 1
        let loadAPIUsers: @Sendable ([User]) throws -> [User] = { [logger] configured in
            clustered ? [] : try UserAdministration.load(database, configured: configured, logger: logger)
        }
        let apiUsers = try loadAPIUsers(fileConfiguration.users)
        var configuration = fileConfiguration.adding(users: apiUsers)
        for file in database.path.map(StorageFiles.readableByOthers(databasePath:)) ?? [] {
            logger.warning("storage readable by other users; it holds the token signing key: chmod go-rwx it",
                           ["file": file])
        }
        // Rooms made through the API or MQTT requests join their users' (README, "Managing the home"):
        // the file's users' and those made through the API.
        let managedRooms = ManagedRoomStore(database: database)
        let rules = RoomRules(configuration: fileConfiguration, configFile: configFile)
        let merged: (users: [User], skipped: [(ManagedRoom, String)])
        let keptRooms: [ManagedRoom]
        do {
            keptRooms = try managedRooms.all()
            merged = rules.merge(configuration.users, rows: keptRooms)
        } catch {
            throw RuntimeError("cannot read the rooms made through the API: \(error.description)")
        }
        RoomManager.log(skipped: merged.skipped, logger)
        configuration.users = merged.users
        self.configuration = configuration
        let topics = Topics(base: configuration.mqtt.baseTopic)
        let outbound = Outbound(broker: mqtt, qos: configuration.mqtt.qos, logger: logger)
        let identity = HomeAssistantDiscovery(prefix: configuration.homeAssistant.prefix, topics: topics,
                                              version: Bridge.version, sourceKind: configuration.source.kind.rawValue)
        let discovery = configuration.homeAssistant.discovery ? identity : nil
        let store = HomeStore(home: Home(users: configuration.users))
        let online = OnlineInstances()
        // On PostgreSQL, what a user's owner does follows the lease (docs/scaling.md, "Leases"): the
        // sources start with nobody and follow the leases this instance takes and hands back.
        let byLease = clustered && database.url.isPostgres
        // The leases on a connection of their own: a lease round never waits behind a history batch.
        let leaseStore = byLease ? LeaseStore(database: try Database.separateConnection(of: database)) : nil
        let ownership = Ownership(membership: configuration.cluster.membership, leases: leaseStore)
        // The users this instance may act for (every user by lease), and those it owns now.
        let actsFor = byLease ? configuration : configuration.owned
        var sourced = configuration
        sourced.users = configuration.users.filter { ownership.owns($0.id) }
        let publisher = StatePublisher(configuration: configuration, store: store, broker: mqtt, logger: logger,
                                       discovery: discovery, startedAt: startedAt, othersOnline: { !online.isEmpty },
                                       ownership: ownership)
        let bus = StateBus(publisher: publisher)
        controller = HomeController(store: store, bus: bus, ownership: ownership)
        publisher.refreshSource.withLock { [controller] in $0 = { controller.offerForRefresh() } }
        router = MessageRouter(broker: mqtt, logger: logger)
        source = configuration.source.kind == .rest
            ? RestSource(configuration: sourced, controller: controller,
                         client: UpstreamClient(source: configuration.source), logger: logger)
            : SimulatedSource(configuration: sourced, controller: controller, broker: mqtt, logger: logger)
        let devices = try DeviceSource(configuration: actsFor, bound: sourced.users, controller: controller,
                                       bridgeBroker: mqtt,
                                       bridgeBrokerAddress: broker.description, router: router, logger: logger)
        let sourceSwitch = source.lightSwitch
        let homie = configuration.homie.enabled
            ? HomieDevices(prefix: configuration.homie.prefix, topics: topics, version: Bridge.version,
                           users: configuration.users, instance: clustered ? configuration.cluster.index : nil)
            : nil
        let commands = CommandService(controller: controller, configuration: configuration, outbound: outbound,
                                      logger: logger,
                                      lights: { target in devices.bindsLight(target.key) ? devices : sourceSwitch },
                                      switchTimeout: max(configuration.source.timeout,
                                                         configuration.devices.commandTimeout) + 5,
                                      instanceOnline: { [index = configuration.cluster.index] in $0 == index || online.contains($0) },
                                      homie: homie)
        history = HistoryStore(database: database)
        let recorder = HistoryRecorder(store: history, retentionDays: configuration.storage.retentionDays, logger: logger)
        let events = EventHub(limits: .init(perSession: configuration.http.maxStreamsPerToken,
                                            perUser: configuration.http.maxStreamsPerUser))
        let groups = GroupStatePublisher(store: store, outbound: outbound, topics: topics,
                                         ownership: ownership)
        let observer = SensorObserver()
        // This instance's users (another notifies for its own); on PostgreSQL every user, as only the
        // owned users' events and availability reach the state bus.
        let notifier = Notifier(users: actsFor.users, settings: configuration.notify, logger: logger)
        for subscriber in [recorder, events, commands, groups, observer, notifier] as [any StateSubscriber] {
            bus.subscribe(subscriber)
        }
        let homieFeature = try homie.map {
            try HomieFeature(configuration: configuration, brokerURL: broker, devices: $0, store: store, broker: mqtt,
                             ownership: ownership, logger: logger)
        }
        if let homieFeature { bus.subscribe(homieFeature) }
        let sessions = try SessionService(configuration: configuration, database: database, events: events,
                                          logger: logger)
        let alarmStore = AlarmStore(database: database)
        let schedule = AlarmSchedule(
            timeZone: configuration.scheduler.timezone.flatMap(TimeZone.init(identifier:)) ?? .current,
            grace: configuration.scheduler.grace, location: configuration.scheduler.location)
        let watchdogStore = WatchdogStore(database: database)
        // Instances on one PostgreSQL read and write alarms, watchdogs, revocations and history there;
        // only instances with a database each replicate them over MQTT (docs/scaling.md).
        let replicates = clustered && !database.url.isPostgres
        let replication = replicates
            ? AlarmReplication(records: ReplicatedAlarms(store: alarmStore, topics: topics), home: store, outbound: outbound,
                               logger: logger) : nil
        let watchdogReplication = replicates
            ? WatchdogReplication(records: ReplicatedWatchdogs(store: watchdogStore, topics: topics), home: store,
                                  outbound: outbound, logger: logger) : nil
        let leases = leaseStore.map {
            LeaseKeeper(store: $0, configuration: configuration, ownership: ownership, logger: logger)
        }
        let announced = AnnouncedConfigStore(database: database,
                                             instance: database.url.isPostgres ? configuration.cluster.index : 0)
        let scheduler = AlarmScheduler(store: alarmStore, schedule: schedule, controller: controller, commands: commands,
                                       replication: replication, leases: leases, logger: logger)
        let layout = HomeLayout(store: store, source: source, devices: devices, publisher: publisher, discovery: discovery,
                                announced: announced, sourced: { ownership.owns($0) }, logger: logger,
                                changed: { homieFeature?.roomsChanged() })
        // Users taken over start from what the database last had (their lights above all), the sources
        // follow, and their retained state, Home Assistant configs and availability go out at once.
        ownership.onChange { [history, controller] change in
            if !change.taken.isEmpty {
                do {
                    _ = controller.restore(try history.lastValues().filter { change.taken.contains($0.user) })
                } catch {
                    logger.warning("cannot read the last values of the users taken over", ["error": "\(error)"])
                }
            }
            layout.ownershipChanged(change)
            if !change.taken.isEmpty { publisher.publishTakenOver(change.taken) }
            homieFeature?.ownershipChanged(change)
        }
        let rooms = RoomManager(rules: rules, rows: keptRooms,
                                store: managedRooms, home: store, layout: layout)
        let users = clustered ? nil : UserAdministration(database: database, home: store, rooms: rooms,
                                                         sessions: sessions, apiUsers: apiUsers, logger: logger)
        reloader = ConfigReloader(configFile: configFile, environment: environment, started: loaded ?? fileConfiguration,
                                  rooms: rooms, apiUsers: loadAPIUsers, logger: logger,
                                  usersChanged: { sessions.usersChanged($0) })
        let requests = BridgeRequests(topics: topics, rooms: rooms, store: store, outbound: outbound, broker: mqtt,
                                      startedAt: startedAt, logger: logger, reload: { [reloader] in await reloader.reload() })
        var features: [any BridgeFeature] = [
            publisher, commands, groups, recorder, events, source,
            HomeAssistantFeature(identity: identity, discovery: discovery, announced: announced,
                                 store: store, publisher: publisher, outbound: outbound, router: router, logger: logger),
            scheduler,
            WatchdogMonitor(store: watchdogStore, rules: WatchdogRules(timeZone: schedule.calendar.timeZone),
                            observer: observer, controller: controller, logger: logger),
            notifier, reloader,
        ]
        if let leases { features.append(leases) }
        // In a cluster one instance answers requests, so a request gets one answer (README, "Managing the home").
        if !clustered || configuration.cluster.index == 0 { features.append(requests) }
        features.append(devices)
        if let homieFeature { features.append(homieFeature) }
        var mirrors: MirrorSubscriptions?
        var clusterHistory: ClusterHistory?
        if clustered {
            mirrors = MirrorSubscriptions(router: router, controller: controller, events: events, topics: topics,
                                          logger: logger, idle: .milliseconds(Int(configuration.cluster.mirrorIdle * 1000)))
            clusterHistory = replicates
                ? ClusterHistory(local: DatabaseHistory(store: history), membership: configuration.cluster.membership,
                                 topics: topics, outbound: outbound, timeout: configuration.cluster.commandTimeout,
                                 logger: logger)
                : nil
            features += [mirrors!] + ([replication, clusterHistory, watchdogReplication] as [(any BridgeFeature)?])
                .compactMap { $0 }
            features.append(try ClusterPeers(configuration: configuration, broker: broker, store: store, publisher: publisher,
                                             sessions: sessions, online: online, replicatesRevocations: replicates,
                                             logger: logger))
        }
        self.features = features
        http = HTTPFrontend.server(configuration: configuration, parts: HTTPFrontend.Parts(
            store: store, broker: mqtt, brokerAddress: brokerAddress, startedAt: startedAt, sessions: sessions,
            alarms: DatabaseAlarms(store: alarmStore, replication: replication),
            history: clusterHistory ?? DatabaseHistory(store: history), schedule: schedule,
            watchdogs: DatabaseWatchdogs(store: watchdogStore, replication: watchdogReplication), notifier: notifier,
            events: events, commands: commands, mirrors: mirrors, roomDocuments: publisher.roomDocuments,
            devices: devices, rooms: rooms, users: users, alarmsInMemory: { scheduler.loadedCount }),
            logger: logger)
    }

    /// Reads the config file again and applies it (README, "Managing the home"); for SIGHUP.
    public func requestReload() {
        reloader.requestReload()
    }

    /// The port the HTTP server listens on (useful when `http.port` is 0).
    public var httpPort: Int { http.port }

    /// Serves HTTP, connects to the broker and runs every feature until the task is cancelled;
    /// then shuts the features down in reverse order, disconnects and stops serving.
    public func run() async throws {
        try http.start()
        logger.info("HTTP listening", ["bind": configuration.http.bind, "port": String(http.port),
                                       "scheme": configuration.http.tlsCert == nil ? "http" : "https"])
        Bridge.warnAboutSettings(configuration, logger: logger)
        controller.seed(source.initialReadings())
        do {
            let restored = controller.restore(try history.lastValues())
            if restored > 0 { logger.info("restored last values from the database", ["values": String(restored)]) }
        } catch {
            logger.error("cannot read the last values; starting from defaults", ["error": error.description])
        }
        for feature in features { try router.add(feature) }
        if configuration.cluster.instances > 1 {
            logger.info("cluster instance", ["index": String(configuration.cluster.index),
                                             "instances": String(configuration.cluster.instances),
                                             "owned_users": String(configuration.owned.users.count),
                                             "users": String(configuration.users.count)])
        }
        try mqtt.start()
        logger.info("connecting to broker", ["broker": brokerAddress, "client_id": configuration.clientID])
        await withDiscardingTaskGroup { group in
            group.addTask { await self.handleEvents() }
            for feature in features {
                group.addTask { await feature.run() }
            }
        }
        logger.info("shutting down")
        for feature in features.reversed() { await feature.shutdown() }
        mqtt.stop()
        http.stop()
    }

    /// The MQTT event loop: connection events to the log and to every feature, messages to the
    /// features that subscribed to them.
    private func handleEvents() async {
        var wasConnected = false
        for await event in mqtt.events {
            Bridge.log(event, broker: mqtt, address: brokerAddress, wasConnected: wasConnected, logger: logger)
            switch event {
            case .connected:
                wasConnected = true
                for feature in features { feature.connected() }
            case .refused, .disconnected:
                wasConnected = false
            case .message(let message):
                router.route(message)
            }
        }
    }
}
