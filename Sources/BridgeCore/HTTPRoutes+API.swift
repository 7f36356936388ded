import Foundation

/// `/api/v1` (README, "The authenticated API (v1)"): login, logout, and the token's own user's rooms and lights.
extension HTTPRoutes {
    func api(_ request: HTTPRequest, method: String, path: [String], home: () -> Home) -> HTTPResponse {
        switch path {
        case _ where path.matches("login"):
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return apiLogin(request, home: home())
        case _ where path.matches("logout"):
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return authenticated(request, home: home) { session, token in
                do {
                    try sessions.revoke(token)
                } catch {
                    return failed(request, error)
                }
                securityLog(SecurityEvent(action: "logout", user: session.userID,
                                          address: ClientAddress.of(request, trustedProxies: trustedProxies), outcome: "ok"))
                return HTTPResponse(status: 204)
            }
        case _ where path.matches("logout", "all"):
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return authenticated(request, home: home) { session, _ in
                if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                do {
                    try sessions.revokeAll(session.userID)
                } catch {
                    return HTTPRoutes.internalError
                }
                securityLog(SecurityEvent(action: "logout_everywhere", user: session.userID,
                                          address: ClientAddress.of(request, trustedProxies: trustedProxies), outcome: "ok"))
                return HTTPResponse(status: 204)
            }
        case _ where path.matches("events"):
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET") }
            return authenticated(request, home: home) { session, _ in
                switch openEvents(session) {
                case .refused(let message):
                    securityLog(SecurityEvent(action: "events", user: session.userID,
                                              address: ClientAddress.of(request, trustedProxies: trustedProxies),
                                              outcome: "throttled"))
                    var response = HTTPRoutes.error(429, message)
                    response.headers.append(("Retry-After", "60"))
                    return response
                case .accepted(let attach):
                    return HTTPResponse(
                        status: 200,
                        // Connection: close, so that ending the stream (logout, expiry, overflow, shutdown)
                        // also ends the connection rather than leaving it idle for another request.
                        headers: [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-store"),
                                  ("X-Accel-Buffering", "no"), ("Connection", "close")],
                        body: ServerSentEvents.preamble,
                        stream: attach
                    )
                }
            }
        case _ where path.matches("rooms"):
            guard method == "GET" || (method == "POST" && rooms != nil) else {
                return HTTPRoutes.methodNotAllowed(allow: rooms == nil ? "GET, HEAD" : "GET, HEAD, POST")
            }
            return authenticated(request, home: home) { session, _ in
                if method == "POST" {
                    if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                    return createRoom(request, user: session.userID, home: home)
                }
                guard let user = HTTPRoutes.visibleUser(session, in: home()) else { return HTTPRoutes.unauthorized }
                // The seed-shaped list stays as it is; `?detail=1` is the settings page's (README, "Managing the home").
                if request.queryValue("detail") == "1" {
                    return HTTPRoutes.json(RoomSettings.rooms(user, managed: rooms?.managedRooms(user: user.id) ?? []))
                }
                return HTTPRoutes.json(shared: roomDocuments.roomsList(user))
            }
        case _ where path.count == 2 && path[0] == "rooms":
            guard method == "GET" || (["PUT", "DELETE"].contains(method) && rooms != nil) else {
                return HTTPRoutes.methodNotAllowed(allow: rooms == nil ? "GET, HEAD" : "GET, HEAD, PUT, DELETE")
            }
            return authenticated(request, home: home) { session, _ in
                if method != "GET" {
                    if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                    return changeRoom(request, method: method, user: session.userID, room: path[1], home: home)
                }
                let home = home()
                guard let room = HTTPRoutes.visibleRoom(session, named: path[1], in: home) else { return HTTPRoutes.notFound }
                return HTTPRoutes.json(shared: roomDocuments.apiDocument(room, user: session.userID, in: home))
            }
        case _ where path.count == 3 && path[0] == "rooms" && path[2] == "history":
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return authenticated(request, home: home) { session, _ in
                guard let user = HTTPRoutes.visibleUser(session, in: home()) else { return HTTPRoutes.unauthorized }
                return historyRoute(request, room: path[1], user: user)
            }
        case _ where !path.isEmpty && path[0] == "alarms" && path.count <= 3:
            return authenticated(request, home: home) { session, _ in
                if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                guard let user = home().user(id: session.userID) else { return HTTPRoutes.unauthorized }
                return alarmsRoute(request, method: method, path: path, user: user)
            }
        case _ where !path.isEmpty && path[0] == "watchdogs" && path.count <= 3:
            return authenticated(request, home: home) { session, _ in
                if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                guard let user = home().user(id: session.userID) else { return HTTPRoutes.unauthorized }
                return watchdogsRoute(request, method: method, path: path, user: user)
            }
        case _ where !path.isEmpty && path[0] == "guests" && path.count <= 2:
            return authenticated(request, home: home) { session, _ in
                if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                guard let user = home().user(id: session.userID) else { return HTTPRoutes.unauthorized }
                return guestsRoute(request, method: method, path: path, user: user)
            }
        case _ where !path.isEmpty && (path[0] == "users" && path.count <= 2 || path.matches("devices", "unbound")):
            return authenticated(request, home: home) { session, _ in
                if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                guard let user = home().user(id: session.userID) else { return HTTPRoutes.unauthorized }
                guard user.isAdmin else { return HTTPRoutes.error(403, "Only admins (users[].admin: true) may do this") }
                return adminRoute(request, method: method, path: path, home: home())
            }
        case _ where path.count == 3 && path[0] == "rooms" && path[2] == "lights":
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return authenticated(request, home: home) { session, _ in
                let userID = session.userID
                // Someone else's room, a room a guest doesn't see and a room that doesn't exist look the same: 404.
                guard let room = HTTPRoutes.visibleRoom(session, named: path[1], in: home()) else {
                    return HTTPRoutes.notFound
                }
                if session.guest?.access == .read {
                    return HTTPRoutes.error(403, "This guest may only read these rooms, not switch their lights")
                }
                let command: LightCommand
                switch APIBody.lights(request.body) {
                case .success(let parsed): command = parsed
                case .failure(let problem): return HTTPRoutes.error(400, problem.message)
                }
                switch switchLight(userID, room.id, command) {
                case .success: return roomResponse(user: userID, room: room.id, home: home())
                case .failure(.unknownRoom), .failure(.unknownUser): return HTTPRoutes.notFound
                case .failure(let rejection): return Self.refusal(rejection)
                }
            }
        case _ where path.count == 3 && path[0] == "groups" && path[2] == "lights":
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return authenticated(request, home: home) { session, _ in
                if let refusal = HTTPRoutes.ownersOnly(session) { return refusal }
                return groupLights(request, user: session.userID, group: path[1], home: home)
            }
        default:
            return HTTPRoutes.notFound
        }
    }

    /// `POST /api/v1/groups/:group/lights` `{"state":...}` → 200
    /// `{"group","state","rooms":[{"room","lights"}]}`; another user's group is 404 like a missing one.
    private func groupLights(_ request: HTTPRequest, user userID: String, group: String, home: () -> Home)
        -> HTTPResponse
    {
        guard let switchGroup, home().user(id: userID)?.group(named: group) != nil else { return HTTPRoutes.notFound }
        let command: LightCommand
        switch APIBody.lights(request.body) {
        case .success(let parsed): command = parsed
        case .failure(let problem): return HTTPRoutes.error(400, problem.message)
        }
        switch switchGroup(userID, group, command) {
        case .success(let readings):
            let on = readings.allSatisfy { $0.value == .binary(true) }
            return HTTPRoutes.json(.object([
                ("group", .string(group)), ("state", .string(on ? "ON" : "OFF")),
                ("rooms", .array(readings.map {
                    .object([("room", .string($0.room)), ("lights", .string($0.value.mqttPayload))])
                })),
            ]))
        case .failure(.unknownGroup), .failure(.unknownUser): return HTTPRoutes.notFound
        case .failure(let rejection): return Self.refusal(rejection)
        }
    }

    /// A light command the bridge did not carry out: 429 over the rate limit (README "Security
    /// model"), 504 when whoever had to carry it out did not answer, else 409.
    private static func refusal(_ rejection: CommandRejection) -> HTTPResponse {
        switch rejection {
        case .rateLimited(let wait):
            HTTPRoutes.tooManyRequests(retryAfter: CommandRejection.wholeSeconds(wait), message: rejection.description)
        case _ where rejection.isGatewayTimeout: HTTPRoutes.error(504, rejection.description)
        default: HTTPRoutes.error(409, rejection.description)
        }
    }

    private func apiLogin(_ request: HTTPRequest, home: Home) -> HTTPResponse {
        let credentials: APIBody.Login
        switch APIBody.login(request.body) {
        case .success(let parsed): credentials = parsed
        case .failure(let problem): return HTTPRoutes.error(400, problem.message)
        }
        switch loginGate.attempt(username: credentials.username, password: credentials.password,
                                 address: ClientAddress.of(request, trustedProxies: trustedProxies), in: home) {
        case .throttled(let wait):
            return HTTPRoutes.tooManyRequests(retryAfter: wait)
        case .denied:
            return HTTPRoutes.error(401, "Invalid username or password")
        case .granted(let user):
            let token: String
            do {
                token = try sessions.create(user.id)
            } catch {
                return failed(request, error)
            }
            return HTTPRoutes.json(.object([
                ("token", .string(token)), ("userID", .string(user.id)), ("rooms", .strings(user.rooms.map(\.id))),
                // Whether the admins' routes answer (README, "Admins and unbound devices"), so a client can offer them.
                ("admin", .bool(user.isAdmin)),
            ]))
        }
    }

    func roomResponse(user userID: String, room name: String, home: Home, status: Int = 200) -> HTTPResponse {
        guard let room = home.room(ofUser: userID, named: name) else { return HTTPRoutes.notFound }
        return HTTPRoutes.json(shared: roomDocuments.apiDocument(room, user: userID, in: home), status: status)
    }

    /// Runs `body` with the token's session, or answers 401: for a missing, forged, expired or revoked token,
    /// and for a valid one whose user is no longer configured (README "The authenticated API (v1)").
    private func authenticated(
        _ request: HTTPRequest, home: () -> Home,
        _ body: (_ session: SessionServices.Session, _ token: String) -> HTTPResponse
    ) -> HTTPResponse {
        guard let token = HTTPRoutes.bearerToken(request) else { return HTTPRoutes.unauthorized }
        let session: SessionServices.Session?
        do {
            session = try sessions.resolve(token)
        } catch {
            return failed(request, error)
        }
        guard let session, home().hasUser(id: session.userID) else { return HTTPRoutes.unauthorized }
        prepareUser?(session.userID)
        return body(session, token)
    }

    /// The token of an `Authorization: Bearer <token>` header.
    static func bearerToken(_ request: HTTPRequest) -> String? {
        guard let value = request.headers["authorization"] else { return nil }
        // Byte by byte on the header's own bytes rather than through Foundation's trimming or a copy:
        // this runs on every API request.
        var header = value
        return header.withUTF8 { bytes -> String? in
            let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
            var start = bytes.firstIndex { !isBlank($0) } ?? bytes.endIndex
            let scheme = "bearer".utf8
            guard bytes.count - start > scheme.count,
                  zip(bytes[start...], scheme).allSatisfy({ $0 | 0x20 == $1 }), isBlank(bytes[start + scheme.count])
            else { return nil }
            start += scheme.count
            while start < bytes.count, isBlank(bytes[start]) { start += 1 }
            var end = bytes.count
            while end > start, isBlank(bytes[end - 1]) { end -= 1 }
            // Signed tokens carry the user id, so their length follows it; 1 KiB still caps the work.
            guard end > start, end - start <= 1024 else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
    }

    static var unauthorized: HTTPResponse {
        var response = error(401, "Missing, invalid or expired token")
        response.headers.append(("WWW-Authenticate", "Bearer"))
        return response
    }
}
