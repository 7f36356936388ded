import BridgeCore
import BridgeCrypto
import BridgeHTTP
import BridgeStorage
import Foundation

/// The HTTP side: the routes (`HTTPRoutes`, pure) wired to the bridge's state, command path,
/// storage and event streams, served by libmicrohttpd.
enum HTTPFrontend {
    struct Parts {
        var store: HomeStore
        var broker: any BrokerLink
        var brokerAddress: String
        var startedAt: Date
        var sessions: SessionService
        var alarms: any AlarmRepository
        var history: any HistoryRepository
        var schedule: AlarmSchedule
        var watchdogs: any WatchdogRepository
        var notifier: Notifier
        var events: EventHub
        var commands: CommandService
        var mirrors: MirrorSubscriptions?
        var roomDocuments: RoomDocuments
        var devices: DeviceSource?
        var rooms: (any RoomManagement)?
        var users: UserAdministration?
        var alarmsInMemory: @Sendable () -> Int = { 0 }
    }

    static func server(configuration: BridgeConfiguration, parts: Parts, logger: Logger) -> HTTPServer {
        var dashboard: (@Sendable (String) -> HTTPResponse?)?
        if let files = StaticFiles(root: configuration.http.webRoot) {
            dashboard = { path in files.response(for: path) }
        }
        var routes = HTTPRoutes(
            legacyRoutes: configuration.http.legacyRoutes,
            loginGate: LoginGate(
                verifyPassword: { password, hash in PasswordHasher.verify(password: password, userHash: hash) },
                now: { Date().timeIntervalSinceReferenceDate },
                record: SecurityLog.recorder(logger)
            ),
            sessions: parts.sessions.services,
            alarms: parts.alarms,
            history: parts.history,
            schedule: parts.schedule,
            openEvents: { [events = parts.events] session in events.open(session) },
            staticFiles: dashboard,
            switchLight: { [commands = parts.commands] user, room, command in
                commands.switchAndWait(command, user: user, room: room)
            }
        )
        routes.metricsToken = configuration.http.metricsToken
        routes.switchGroup = { [commands = parts.commands] user, group, command in
            commands.switchGroupAndWait(command, user: user, group: group)
        }
        if let mirrors = parts.mirrors {
            routes.prepareUser = { user in mirrors.ensure(user: user) }
        }
        routes.roomDocuments = parts.roomDocuments
        routes.rooms = parts.rooms
        routes.allowedHosts = HostAllowList(configured: configuration.http.allowedHosts, bind: configuration.http.bind)
        routes.trustedProxies = configuration.http.trustedProxySet
        routes.securityLog = SecurityLog.recorder(logger)
        routes.watchdogs = parts.watchdogs
        routes.guests = parts.sessions.guestServices
        routes.configFile = configuration.file
        routes.users = parts.users?.services
        if let devices = parts.devices { routes.unboundDevices = { devices.unboundDevices } }
        routes.maxWatchdogsPerUser = configuration.watchdogs.maxPerUser
        routes.maxAlarmsPerUser = configuration.alarms.maxPerUser
        routes.reportFailure = { (request: HTTPRequest, error: any Error) in
            // The legacy login route carries a password in its path: never logged.
            let path = request.path.hasPrefix("/login/") ? "/login/…" : request.path
            logger.error("request failed", ["method": request.method, "path": path, "error": "\(error)"])
        }
        let finalRoutes = routes
        let logRequests = logger.minimumLevel <= .debug
        return HTTPServer(configuration: Bridge.httpConfiguration(configuration.http)) { request in
            let started = logRequests ? Monotonic.now : 0
            let response = finalRoutes.respond(
                to: request,
                home: { parts.store.home },
                health: {
                    var health = HTTPRoutes.Health(
                        mqttConnected: parts.broker.isConnected,
                        mqttProblem: parts.broker.lastProblem,
                        broker: parts.brokerAddress,
                        uptimeSeconds: Int(Date().timeIntervalSince(parts.startedAt)),
                        mqttQueued: parts.broker.queuedMessages,
                        mqttDropped: parts.broker.droppedMessages,
                        devicePayloadErrors: parts.devices?.payloadErrors.map {
                            HTTPRoutes.Health.PayloadErrors(user: $0.0.user, room: $0.0.room, sensor: $0.1, count: $0.2)
                        } ?? [],
                        deviceMessagesDropped: parts.devices?.droppedMessages ?? 0,
                        notifications: parts.notifier.snapshot
                    )
                    health.alarmsInMemory = parts.alarmsInMemory()
                    return health
                }
            )
            if logRequests {
                // The legacy login route carries a password in its path: never logged.
                logger.debug("request", ["method": request.method,
                                         "path": request.path.hasPrefix("/login/") ? "/login/…" : request.path,
                                         "status": String(response.status), "client": request.clientAddress,
                                         "ms": String(format: "%.1f", (Monotonic.now - started) * 1000)])
            }
            return response
        }
    }
}
