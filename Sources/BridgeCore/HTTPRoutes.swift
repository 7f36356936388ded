import Foundation

/// The bridge's HTTP routes as functions of the request and the current state: the seed backend's
/// routes (README "HTTP"), the authenticated API (README "The authenticated API (v1)") and `/healthz`.
public struct HTTPRoutes: Sendable {
    /// What `/healthz` reports.
    public struct Health: Sendable {
        public var mqttConnected: Bool
        /// Why the broker is unreachable, when it is.
        public var mqttProblem: String?
        public var broker: String
        public var uptimeSeconds: Int
        /// Messages waiting for the broker, and dropped because that queue was full (since start).
        public var mqttQueued: Int
        public var mqttDropped: Int
        /// Device messages that gave no value, per bound sensor (README, "Connect your devices").
        public var devicePayloadErrors: [PayloadErrors]
        /// Device messages dropped because they came faster than the bridge applies them.
        public var deviceMessagesDropped: Int

        public struct PayloadErrors: Sendable, Equatable {
            public var user: String
            public var room: String
            public var sensor: String
            public var count: Int

            public init(user: String, room: String, sensor: String, count: Int) {
                self.user = user
                self.room = room
                self.sensor = sensor
                self.count = count
            }
        }

        /// Notification deliveries since start (README "Notifications").
        public var notifications = NotificationCounts()
        /// Alarms the scheduler holds in memory: those due soon (README "Alarms", "Limits and pages").
        public var alarmsInMemory = 0

        public init(mqttConnected: Bool, mqttProblem: String?, broker: String, uptimeSeconds: Int,
                    mqttQueued: Int = 0, mqttDropped: Int = 0, devicePayloadErrors: [PayloadErrors] = [],
                    deviceMessagesDropped: Int = 0, notifications: NotificationCounts = NotificationCounts()) {
            self.notifications = notifications
            self.devicePayloadErrors = devicePayloadErrors
            self.deviceMessagesDropped = deviceMessagesDropped
            self.mqttConnected = mqttConnected
            self.mqttProblem = mqttProblem
            self.broker = broker
            self.uptimeSeconds = uptimeSeconds
            self.mqttQueued = mqttQueued
            self.mqttDropped = mqttDropped
        }
    }

    /// Notification deliveries, for `/metrics`.
    public struct NotificationCounts: Sendable, Equatable {
        public var sent = 0
        public var failed = 0
        public var retried = 0
        public var dropped = 0

        public init() {}
    }

    public var legacyRoutes: Bool
    public var loginGate: LoginGate
    public var sessions: SessionServices
    /// Runs a light command through the bridge's one command path.
    public var switchLight: @Sendable (_ user: String, _ room: String, LightCommand) -> Result<Reading, CommandRejection>
    /// Runs a group's light command (README, "Groups") through the same path; nil: no group routes.
    public var switchGroup: (@Sendable (_ user: String, _ group: String, LightCommand) -> Result<[Reading], CommandRejection>)?
    public var alarms: any AlarmRepository
    public var history: any HistoryRepository
    /// Orders alarm lists by time of day in the scheduler's time zone and says when each fires next.
    public var schedule: AlarmSchedule
    /// The user's watchdogs (`nil`: the routes answer 404), and how many one user may have.
    public var watchdogs: (any WatchdogRepository)?
    public var maxWatchdogsPerUser = 20
    /// Guests (README, "Guests"); `nil`: the guest routes answer 404.
    public var guests: GuestServices?
    /// Devices heard that no binding claims (README, "Admins and unbound devices"), for admins; `nil`:
    /// the bridge doesn't listen for them (an empty list).
    public var unboundDevices: (@Sendable () -> [UnboundDevice])?
    /// Users made through the API (README, "Admins and unbound devices"); `nil`: only the config's.
    public var users: UserServices?
    /// The config file, named when a change only it can make is asked of the API.
    public var configFile: String?
    /// The most alarms one user may have (`alarms.max_per_user`, README "Alarms").
    public var maxAlarmsPerUser = 100
    /// The clock alarms' `nextFire` is computed against.
    public var now: @Sendable () -> Date = { Date() }
    public var openEvents: EventStreamOpener
    /// The dashboard's files (`GET /` and what it loads), when there are any.
    public var staticFiles: (@Sendable (_ path: String) -> HTTPResponse?)?
    /// The `Host` names answered; any other is 421 (README "Host names"). `nil` answers every host.
    public var allowedHosts: HostAllowList?
    /// Peers whose `X-Forwarded-For` names the real client (README "Security model").
    public var trustedProxies: Set<String> = []
    /// The security log: logouts here; logins go through `loginGate`'s own recorder.
    public var securityLog: @Sendable (SecurityEvent) -> Void = { _ in }
    /// Called before a route reads a user's state (cluster: fetches the state of a user another
    /// instance owns). May block; it runs on the server's thread.
    public var prepareUser: (@Sendable (_ userID: String) -> Void)?
    /// `http.metrics_token`: when set, `/metrics` wants `Authorization: Bearer <token>`.
    public var metricsToken: String?
    /// Rooms made through the API (README, "Managing the home"); nil: `POST`, `PUT` and `DELETE`
    /// on rooms answer 405.
    public var rooms: (any RoomManagement)?
    /// Rooms' JSON, shared with the MQTT side so each change is serialised once.
    public var roomDocuments = RoomDocuments()
    /// Told of every failure of the bridge itself before the route answers 500 (which names no
    /// internals), so the log says what went wrong.
    public var reportFailure: (@Sendable (_ request: HTTPRequest, _ error: any Error) -> Void)?

    public init(
        legacyRoutes: Bool,
        loginGate: LoginGate,
        sessions: SessionServices,
        alarms: any AlarmRepository,
        history: any HistoryRepository,
        schedule: AlarmSchedule,
        openEvents: @escaping EventStreamOpener,
        staticFiles: (@Sendable (String) -> HTTPResponse?)? = nil,
        switchLight: @escaping @Sendable (String, String, LightCommand) -> Result<Reading, CommandRejection>
    ) {
        self.legacyRoutes = legacyRoutes
        self.loginGate = loginGate
        self.sessions = sessions
        self.alarms = alarms
        self.history = history
        self.schedule = schedule
        self.openEvents = openEvents
        self.staticFiles = staticFiles
        self.switchLight = switchLight
    }

    /// Answers one request. `home` and `health` are read only if the route needs them.
    public func respond(to request: HTTPRequest, home: () -> Home, health: () -> Health) -> HTTPResponse {
        HTTPRoutes.secured(route(request, home: home, health: health))
    }

    private func route(_ request: HTTPRequest, home: () -> Home, health: () -> Health) -> HTTPResponse {
        // The server has percent-decoded the path: a "%00" is a NUL now, which C libraries (the file system,
        // SQLite) would take as the end of the text (README "HTTP").
        if request.path.utf8.contains(0) {
            return HTTPRoutes.error(400, "the request path must not contain %00 (NUL)")
        }
        if let allowedHosts, !allowedHosts.allows(hostHeader: request.headers["host"]) {
            return HTTPRoutes.error(421, "This bridge does not answer to the host name in the request; "
                + "add it to http.allowed_hosts")
        }
        let segments = Self.pathSegments(request.path)
        let method = request.method == "HEAD" ? "GET" : request.method

        switch segments {
        case _ where segments.matches("healthz"):
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return healthz(health())
        case _ where segments.matches("metrics"):
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            if let metricsToken, !HTTPRoutes.sameBytes(HTTPRoutes.bearerToken(request), metricsToken) {
                return HTTPRoutes.unauthorized
            }
            return HTTPRoutes.metrics(health(), home: home())
        case _ where segments.count >= 2 && segments[0] == "api" && segments[1] == "v1":
            return api(request, method: method, path: Array(segments.dropFirst(2)), home: home)
        case _ where legacyRoutes && segments.count == 3 && segments[0] == "login":
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return legacyLogin(username: segments[1], password: segments[2],
                               address: ClientAddress.of(request, trustedProxies: trustedProxies),
                               home: home())
        case _ where legacyRoutes && (segments.count == 2 || segments.count == 3) && segments[0] == "rooms":
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            if segments.count == 3 { prepareUser?(segments[1]) }
            let home = home()
            guard segments.count == 3 else {
                guard let user = home.user(id: segments[1]) else { return HTTPRoutes.notFound }
                return HTTPRoutes.json(shared: roomDocuments.roomsList(user))
            }
            // An unknown user and an unknown room are the same 404.
            guard let document = roomDocuments.document(ofUser: segments[1], named: segments[2], in: home) else {
                return HTTPRoutes.notFound
            }
            return HTTPRoutes.json(shared: document)
        default:
            guard let file = staticFiles?(request.path) else {
                return staticFiles == nil && request.path == "/" ? HTTPRoutes.noDashboard : HTTPRoutes.notFound
            }
            return method == "GET" ? file : HTTPRoutes.methodNotAllowed(allow: "GET, HEAD")
        }
    }

    private func legacyLogin(username: String, password: String, address: String, home: Home) -> HTTPResponse {
        switch loginGate.attempt(username: username, password: password, address: address, in: home) {
        case .granted(let user): return HTTPRoutes.json(SeedShapes.login(user))
        case .denied: return HTTPRoutes.json(SeedShapes.loginFailed)
        case .throttled(let wait): return HTTPRoutes.tooManyRequests(retryAfter: wait)
        }
    }

    private func healthz(_ health: Health) -> HTTPResponse {
        var members: [(String, JSONValue)] = [
            ("status", .string(health.mqttConnected ? "ok" : "degraded")),
            ("mqtt", .string(health.mqttConnected ? "connected" : "disconnected")),
            ("broker", .string(health.broker)),
            ("uptimeSeconds", .integer(health.uptimeSeconds)),
            ("mqttQueued", .integer(health.mqttQueued)),
            ("mqttDropped", .integer(health.mqttDropped)),
        ]
        if let problem = health.mqttProblem, !health.mqttConnected {
            members.append(("problem", .string(problem)))
        }
        return HTTPRoutes.json(.object(members), status: health.mqttConnected ? 200 : 503)
    }

    /// `/metrics` in Prometheus's text format: the broker connection, the offline queue, and the
    /// size of the home. Counters end in `_total`, as Prometheus expects.
    static func metrics(_ health: Health, home: Home) -> HTTPResponse {
        let rooms = home.users.reduce(0) { $0 + $1.rooms.count }
        var lines = [
            "# HELP smarthome_mqtt_connected Whether the broker has accepted the bridge's connection (1) or not (0).",
            "# TYPE smarthome_mqtt_connected gauge",
            "smarthome_mqtt_connected \(health.mqttConnected ? 1 : 0)",
            "# HELP smarthome_mqtt_queued_messages QoS 1 messages waiting for the broker.",
            "# TYPE smarthome_mqtt_queued_messages gauge",
            "smarthome_mqtt_queued_messages \(health.mqttQueued)",
            "# HELP smarthome_mqtt_dropped_messages_total Messages dropped because the offline queue was full.",
            "# TYPE smarthome_mqtt_dropped_messages_total counter",
            "smarthome_mqtt_dropped_messages_total \(health.mqttDropped)",
            "# HELP smarthome_uptime_seconds Seconds since the bridge started.",
            "# TYPE smarthome_uptime_seconds gauge",
            "smarthome_uptime_seconds \(health.uptimeSeconds)",
            "# HELP smarthome_notifications_sent_total Notifications delivered (a 2xx answer).",
            "# TYPE smarthome_notifications_sent_total counter",
            "smarthome_notifications_sent_total \(health.notifications.sent)",
            "# HELP smarthome_notifications_failed_total Notifications given up after notify.attempts tries.",
            "# TYPE smarthome_notifications_failed_total counter",
            "smarthome_notifications_failed_total \(health.notifications.failed)",
            "# HELP smarthome_notifications_retries_total Failed tries that were retried.",
            "# TYPE smarthome_notifications_retries_total counter",
            "smarthome_notifications_retries_total \(health.notifications.retried)",
            "# HELP smarthome_notifications_dropped_total Notifications dropped because notify.max_queued were waiting.",
            "# TYPE smarthome_notifications_dropped_total counter",
            "smarthome_notifications_dropped_total \(health.notifications.dropped)",
            "# HELP smarthome_alarms_in_memory Alarms the scheduler holds: those due within 10 minutes.",
            "# TYPE smarthome_alarms_in_memory gauge",
            "smarthome_alarms_in_memory \(health.alarmsInMemory)",
            "# HELP smarthome_users Configured users.",
            "# TYPE smarthome_users gauge",
            "smarthome_users \(home.users.count)",
            "# HELP smarthome_rooms Configured rooms.",
            "# TYPE smarthome_rooms gauge",
            "smarthome_rooms \(rooms)",
            "# HELP smarthome_device_messages_dropped_total Device messages dropped: they came faster than applied.",
            "# TYPE smarthome_device_messages_dropped_total counter",
            "smarthome_device_messages_dropped_total \(health.deviceMessagesDropped)",
            "# HELP smarthome_device_payload_errors_total Device messages that gave no value, per bound sensor.",
            "# TYPE smarthome_device_payload_errors_total counter",
        ]
        lines += health.devicePayloadErrors.map { errors in
            "smarthome_device_payload_errors_total{user=\"\(label(errors.user))\",room=\"\(label(errors.room))\","
                + "sensor=\"\(label(errors.sensor))\"} \(errors.count)"
        }
        lines += sensorMetrics(home)
        return HTTPResponse(
            status: 200,
            headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Cache-Control", "no-store")],
            body: Array((lines.joined(separator: "\n") + "\n").utf8)
        )
    }

    /// Every reading (README, "Prometheus"): `smarthome_sensor_value` (numbers as published on
    /// MQTT, binary sensors 1/0; text sensors have none) and `smarthome_sensor_last_seen_seconds`
    /// (Unix time of the last reading), one series per sensor that has reported: as many lines as
    /// the config has sensors (and an upstream added), no more.
    static func sensorMetrics(_ home: Home) -> [String] {
        var values: [String] = []
        var seen: [String] = []
        for user in home.users {
            for room in user.rooms {
                let key = RoomKey(user: user.id, room: room.id)
                for sensor in home.sensors(of: room, user: user.id) {
                    let labels = "{user=\"\(label(user.id))\",room=\"\(label(room.id))\",sensor=\"\(label(sensor.id))\"}"
                    switch home.value(of: sensor, in: key) {
                    case .number(let number)?: values.append("smarthome_sensor_value\(labels) \(SensorValue.number(number).mqttPayload)")
                    case .binary(let on)?: values.append("smarthome_sensor_value\(labels) \(on ? 1 : 0)")
                    case .text?, nil: break
                    }
                    if let time = home.lastSeen(sensor, in: key) {
                        let millis = Int64((time.timeIntervalSince1970 * 1000).rounded())
                        let fraction = String(1000 + millis % 1000).dropFirst()
                        seen.append("smarthome_sensor_last_seen_seconds\(labels) \(millis / 1000).\(fraction)")
                    }
                }
            }
        }
        return ["# HELP smarthome_sensor_value A sensor's current value (binary sensors: 1 on, 0 off).",
                "# TYPE smarthome_sensor_value gauge"] + values
            + ["# HELP smarthome_sensor_last_seen_seconds Unix time of a sensor's last reading.",
               "# TYPE smarthome_sensor_last_seen_seconds gauge"] + seen
    }

    /// A Prometheus label value: `\`, `"` and line feeds escaped.
    static func label(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    /// Compares a presented secret with the expected one in time that depends only on their lengths.
    static func sameBytes(_ presented: String?, _ expected: String) -> Bool {
        guard let presented else { return false }
        let a = Array(presented.utf8), b = Array(expected.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }

    // MARK: Responses

    /// Headers every response carries: no sniffing, no framing, no referrer, nothing cached, and a
    /// content policy that lets a JSON answer do nothing if a browser opens it.
    public static let securityHeaders: [(name: String, value: String)] = [
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
        ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"),
    ]

    /// The parts of `path` after its first `/`, empty ones kept (`/rooms/1/` is `rooms`, `1`, ``).
    /// Runs on every request: split on the byte (the path is UTF-8 and `/` never occurs inside a multi-byte
    /// character) into one array made with room for the usual depth, where `split` and `map` grew two.
    static func pathSegments(_ path: String) -> [String] {
        var path = path
        // On the path's own bytes: a segment made from them is a new (usually small, inline) string,
        // where one made from a `Substring` retained the path for each segment.
        return path.withUTF8 { bytes in
            var segments: [String] = []
            segments.reserveCapacity(8)
            var start: Int?  // where the current segment began; nil before the first "/"
            for index in bytes.indices where bytes[index] == UInt8(ascii: "/") {
                if let start { segments.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)) }
                start = index + 1
            }
            if let start { segments.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start...]), as: UTF8.self)) }
            return segments
        }
    }

    static func secured(_ response: HTTPResponse) -> HTTPResponse {
        // JSON answers carry the very list that has them all, recognised by its storage.
        if response.headers.sharesStorage(with: jsonHeaders) { return response }
        var response = response
        // Exact names first: JSON answers carry these very strings (`jsonHeaders`), and an exact comparison
        // costs a fraction of the case-insensitive one, which then runs only for headers still missing.
        for header in securityHeaders where !response.headers.contains(where: { $0.name == header.name })
            && response.header(header.name) == nil {
            response.headers.append(header)
        }
        return response
    }

    public static func tooManyRequests(retryAfter seconds: Int, message: String? = nil) -> HTTPResponse {
        var response = error(429, message ?? "Too many failed logins; try again in \(seconds) s")
        response.headers.append(("Retry-After", String(seconds)))
        return response
    }

    public static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse {
        json(bytes: value.bytes, status: status)
    }

    /// JSON already serialised.
    public static func json(bytes: [UInt8], status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: jsonHeaders, body: bytes)
    }

    /// JSON sent many times unchanged: the server may reuse what it made of it (`SharedBody`).
    public static func json(shared: SharedBody, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: jsonHeaders, shared: shared)
    }

    /// A JSON answer's headers, the security headers included, so that `secured` has nothing to add: one
    /// shared array instead of two grown on every request.
    private static let jsonHeaders: [(name: String, value: String)] =
        [("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store")] + securityHeaders

    public static func error(_ status: Int, _ message: String) -> HTTPResponse {
        json(SeedShapes.error(message), status: status)
    }

    public static let notFound = error(404, "Not found")

    /// `/` when the dashboard's folder is missing (README "Web dashboard"): says why instead of a bare
    /// "Not found", without the folder's path, which is the server's business; the log names it.
    public static let noDashboard = error(404, "Not found: no dashboard is served here, because the folder named "
        + "by http.web_root does not exist (the bridge's log and check-config name it)")

    public static func methodNotAllowed(allow: String) -> HTTPResponse {
        var response = error(405, "Method not allowed")
        response.headers.append(("Allow", allow))
        return response
    }

    /// The answer to a failure inside the bridge: says nothing about the cause.
    public static let internalError = error(500, "Internal server error")

    /// A failure of the bridge itself: reported, then answered 500.
    func failed(_ request: HTTPRequest, _ error: any Error) -> HTTPResponse {
        reportFailure?(request, error)
        return HTTPRoutes.internalError
    }
}

extension Array where Element == String {
    /// Whether the path's segments are exactly these. Routes compare with this rather than with an
    /// array literal (`case ["login"]:`), which made an array for every case tried on every request
    /// (docs/performance.md, "Prepared responses").
    func matches(_ only: String) -> Bool { count == 1 && self[0] == only }

    func matches(_ first: String, _ second: String) -> Bool { count == 2 && self[0] == first && self[1] == second }
}
