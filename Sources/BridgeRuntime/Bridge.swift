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

    // Not private: `run()` and the event loop are in Bridge+Run.swift.
    let configuration: BridgeConfiguration
    let logger: Logger
    let mqtt: MQTTClient
    let http: HTTPServer
    let router: MessageRouter
    let controller: HomeController
    let source: any Source
    let history: HistoryStore
    /// In start-up order; shut down in reverse.
    let features: [any BridgeFeature]
    let brokerAddress: String
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
        let clustered = fileConfiguration.cluster.instances > 1
        let starting = try Bridge.startingUsers(fileConfiguration, database: database, configFile: configFile,
                                                logger: logger)
        let configuration = starting.configuration
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
        Bridge.followOwnership(ownership, history: history, controller: controller, layout: layout,
                               publisher: publisher, homie: homieFeature, logger: logger)
        let rooms = RoomManager(rules: starting.rules, rows: starting.keptRooms,
                                store: starting.managedRooms, home: store, layout: layout)
        let users = clustered ? nil : UserAdministration(database: database, home: store, rooms: rooms,
                                                         sessions: sessions, apiUsers: starting.apiUsers, logger: logger)
        reloader = ConfigReloader(configFile: configFile, environment: environment, started: loaded ?? fileConfiguration,
                                  rooms: rooms, apiUsers: starting.loadAPIUsers, logger: logger,
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
}
