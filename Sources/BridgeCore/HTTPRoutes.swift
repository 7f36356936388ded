/// The HTTP routes of the seed backend and the bridge's health check, as pure functions of the
/// request and the current state (contract section 3 and `/healthz`).
public struct HTTPRoutes: Sendable {
    /// What `/healthz` reports.
    public struct Health: Sendable {
        public var mqttConnected: Bool
        /// Why the broker is unreachable, when it is.
        public var mqttProblem: String?
        public var broker: String
        public var uptimeSeconds: Int

        public init(mqttConnected: Bool, mqttProblem: String?, broker: String, uptimeSeconds: Int) {
            self.mqttConnected = mqttConnected
            self.mqttProblem = mqttProblem
            self.broker = broker
            self.uptimeSeconds = uptimeSeconds
        }
    }

    public var legacyRoutes: Bool
    /// Checks a password against a user's hash (`nil` for an unknown user, which must take as
    /// long as a wrong password).
    public var verifyPassword: @Sendable (_ password: String, _ hash: String?) -> Bool

    public init(legacyRoutes: Bool, verifyPassword: @escaping @Sendable (String, String?) -> Bool) {
        self.legacyRoutes = legacyRoutes
        self.verifyPassword = verifyPassword
    }

    /// Answers one request. `home` and `health` are read only if the route needs them.
    public func respond(to request: HTTPRequest, home: () -> Home, health: () -> Health) -> HTTPResponse {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        let method = request.method == "HEAD" ? "GET" : request.method

        switch segments {
        case ["healthz"]:
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return healthz(health())
        case _ where legacyRoutes && segments.count == 3 && segments[0] == "login":
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return login(username: segments[1], password: segments[2], home: home())
        case _ where legacyRoutes && (segments.count == 2 || segments.count == 3) && segments[0] == "rooms":
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            let home = home()
            guard let user = home.user(id: segments[1]) else { return HTTPRoutes.notFound }
            guard segments.count == 3 else { return HTTPRoutes.json(SeedShapes.rooms(user)) }
            guard let room = user.room(named: segments[2]) else { return HTTPRoutes.notFound }
            return HTTPRoutes.json(SeedShapes.room(room, user: user.id, in: home))
        default:
            return HTTPRoutes.notFound
        }
    }

    private func login(username: String, password: String, home: Home) -> HTTPResponse {
        let user = home.user(username: username)
        guard verifyPassword(password, user?.passwordHash), let user else {
            return HTTPRoutes.json(SeedShapes.loginFailed)
        }
        return HTTPRoutes.json(SeedShapes.login(user))
    }

    private func healthz(_ health: Health) -> HTTPResponse {
        var members: [(String, JSONValue)] = [
            ("status", .string(health.mqttConnected ? "ok" : "degraded")),
            ("mqtt", .string(health.mqttConnected ? "connected" : "disconnected")),
            ("broker", .string(health.broker)),
            ("uptimeSeconds", .integer(health.uptimeSeconds)),
        ]
        if let problem = health.mqttProblem, !health.mqttConnected {
            members.append(("problem", .string(problem)))
        }
        return HTTPRoutes.json(.object(members), status: health.mqttConnected ? 200 : 503)
    }

    // MARK: Responses

    public static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse {
        HTTPResponse(
            status: status,
            headers: [("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store")],
            body: value.bytes
        )
    }

    public static func error(_ status: Int, _ message: String) -> HTTPResponse {
        json(SeedShapes.error(message), status: status)
    }

    public static let notFound = error(404, "Not found")

    public static func methodNotAllowed(allow: String) -> HTTPResponse {
        var response = error(405, "Method not allowed")
        response.headers.append(("Allow", allow))
        return response
    }

    /// The answer to a failure inside the bridge: says nothing about the cause.
    public static let internalError = error(500, "Internal server error")
}
