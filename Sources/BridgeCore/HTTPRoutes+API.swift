import Foundation

/// `/api/v1` (README, "The authenticated API (v1)"): login, logout, and the token's own user's rooms and lights.
extension HTTPRoutes {
    func api(_ request: HTTPRequest, method: String, path: [String], home: () -> Home) -> HTTPResponse {
        switch path {
        case ["login"]:
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return apiLogin(request, home: home())
        case ["logout"]:
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return authenticated(request) { _, token in
                do {
                    try sessions.revoke(token)
                } catch {
                    return failed(request, error)
                }
                return HTTPResponse(status: 204)
            }
        case ["events"]:
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET") }
            return authenticated(request) { userID, token in
                let open = openEvents
                return HTTPResponse(
                    status: 200,
                    // Connection: close, so that ending the stream (logout, overflow, shutdown) also
                    // ends the connection rather than leaving it idle for another request.
                    headers: [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-store"),
                              ("X-Accel-Buffering", "no"), ("Connection", "close")],
                    body: ServerSentEvents.preamble,
                    stream: { sink in open(userID, token, sink) }
                )
            }
        case ["rooms"]:
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return authenticated(request) { userID, _ in
                guard let user = home().user(id: userID) else { return HTTPRoutes.unauthorized }
                return HTTPRoutes.json(SeedShapes.rooms(user))
            }
        case _ where path.count == 2 && path[0] == "rooms":
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return authenticated(request) { userID, _ in roomResponse(user: userID, room: path[1], home: home()) }
        case _ where path.count == 3 && path[0] == "rooms" && path[2] == "history":
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return authenticated(request) { userID, _ in
                guard let user = home().user(id: userID) else { return HTTPRoutes.unauthorized }
                return historyRoute(request, room: path[1], user: user)
            }
        case _ where !path.isEmpty && path[0] == "alarms" && path.count <= 3:
            return authenticated(request) { userID, _ in
                guard let user = home().user(id: userID) else { return HTTPRoutes.unauthorized }
                return alarmsRoute(request, method: method, path: path, user: user)
            }
        case _ where !path.isEmpty && path[0] == "watchdogs" && path.count <= 3:
            return authenticated(request) { userID, _ in
                guard let user = home().user(id: userID) else { return HTTPRoutes.unauthorized }
                return watchdogsRoute(request, method: method, path: path, user: user)
            }
        case _ where path.count == 3 && path[0] == "rooms" && path[2] == "lights":
            guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
            return authenticated(request) { userID, _ in
                // Someone else's room and a room that doesn't exist look the same: 404.
                guard home().user(id: userID)?.room(named: path[1]) != nil else { return HTTPRoutes.notFound }
                let command: LightCommand
                switch APIBody.lights(request.body) {
                case .success(let parsed): command = parsed
                case .failure(let problem): return HTTPRoutes.error(400, problem.message)
                }
                switch switchLight(userID, path[1], command) {
                case .success: return roomResponse(user: userID, room: path[1], home: home())
                case .failure(.unknownRoom), .failure(.unknownUser): return HTTPRoutes.notFound
                case .failure(let rejection) where rejection.ownerUnavailable:
                    return HTTPRoutes.error(504, rejection.description)
                case .failure(let rejection): return HTTPRoutes.error(409, rejection.description)
                }
            }
        default:
            return HTTPRoutes.notFound
        }
    }

    private func apiLogin(_ request: HTTPRequest, home: Home) -> HTTPResponse {
        let credentials: APIBody.Login
        switch APIBody.login(request.body) {
        case .success(let parsed): credentials = parsed
        case .failure(let problem): return HTTPRoutes.error(400, problem.message)
        }
        switch loginGate.attempt(username: credentials.username, password: credentials.password,
                                 address: request.clientAddress, in: home) {
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
            ]))
        }
    }

    private func roomResponse(user userID: String, room name: String, home: Home) -> HTTPResponse {
        guard let room = home.user(id: userID)?.room(named: name) else { return HTTPRoutes.notFound }
        let updated = home.updatedAt(RoomKey(user: userID, room: room.id)).map { JSONValue.string(Timestamp.iso8601($0)) }
        return HTTPRoutes.json(bytes: roomDocuments.document(room, user: userID, in: home,
                                                             extra: [("UpdatedAt", updated ?? .null)]))
    }

    /// Runs `body` with the token's user, or answers 401.
    private func authenticated(
        _ request: HTTPRequest, _ body: (_ userID: String, _ token: String) -> HTTPResponse
    ) -> HTTPResponse {
        guard let token = HTTPRoutes.bearerToken(request) else { return HTTPRoutes.unauthorized }
        let userID: String?
        do {
            userID = try sessions.resolve(token)
        } catch {
            return failed(request, error)
        }
        guard let userID else { return HTTPRoutes.unauthorized }
        prepareUser?(userID)
        return body(userID, token)
    }

    /// The token of an `Authorization: Bearer <token>` header.
    static func bearerToken(_ request: HTTPRequest) -> String? {
        guard let value = request.headers["authorization"] else { return nil }
        // Byte by byte rather than through Foundation's trimming: this runs on every API request.
        let bytes = Array(value.utf8)
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        var start = bytes.firstIndex { !isBlank($0) } ?? bytes.endIndex
        let scheme = Array("bearer".utf8)
        guard bytes.count - start > scheme.count,
              zip(bytes[start...], scheme).allSatisfy({ $0 | 0x20 == $1 }), isBlank(bytes[start + scheme.count])
        else { return nil }
        start += scheme.count
        while start < bytes.count, isBlank(bytes[start]) { start += 1 }
        var end = bytes.count
        while end > start, isBlank(bytes[end - 1]) { end -= 1 }
        // Signed tokens carry the user id, so their length follows it; 1 KiB still caps the work.
        guard end > start, end - start <= 1024 else { return nil }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    static var unauthorized: HTTPResponse {
        var response = error(401, "Missing, invalid or expired token")
        response.headers.append(("WWW-Authenticate", "Bearer"))
        return response
    }
}
