/// Rooms made through the API (README, "Managing the home"): `POST /api/v1/rooms`,
/// `PUT` and `DELETE /api/v1/rooms/:room`, each for the token's own user.
extension HTTPRoutes {
    /// `POST /api/v1/rooms` → 201 with the room as `GET /api/v1/rooms/:room` shows it.
    func createRoom(_ request: HTTPRequest, user: String, home: () -> Home) -> HTTPResponse {
        guard let rooms else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
        return withBody(request) { fields in
            rooms.create(user: user, fields).map { room in roomResponse(user: user, room: room.id, home: home(), status: 201) }
        }
    }

    /// `PUT /api/v1/rooms/:room` → 200 with the room; `DELETE` → 204.
    func changeRoom(_ request: HTTPRequest, method: String, user: String, room: String, home: () -> Home) -> HTTPResponse {
        guard let rooms else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
        switch method {
        case "PUT":
            return withBody(request) { fields in
                rooms.update(user: user, room: room, fields).map { roomResponse(user: user, room: $0.id, home: home()) }
            }
        default:
            return HTTPRoutes.answer(rooms.delete(user: user, room: room).map { HTTPResponse(status: 204) }, request, self)
        }
    }

    private func withBody(_ request: HTTPRequest,
                          _ change: ([String: Any]) -> Result<HTTPResponse, RoomChangeFailure>) -> HTTPResponse {
        switch APIBody.object(request.body) {
        case .failure(let problem): return HTTPRoutes.error(400, problem.message)
        case .success(let fields): return HTTPRoutes.answer(change(fields), request, self)
        }
    }

    private static func answer(_ result: Result<HTTPResponse, RoomChangeFailure>, _ request: HTTPRequest,
                               _ routes: HTTPRoutes) -> HTTPResponse {
        switch result {
        case .success(let response): return response
        case .failure(.invalid(let issues)): return invalid(issues)
        case .failure(.notFound): return notFound
        case .failure(.conflict(let message)): return error(409, message)
        case .failure(.failed(let message)): return routes.failed(request, RoomStorageFailure(description: message))
        }
    }

    /// 400 naming every problem: `{"error":{"message":"...","problems":[{"path":"sensors[1]","message":"..."}]}}`.
    static func invalid(_ issues: [ConfigIssue]) -> HTTPResponse {
        json(.object([("error", .object([
            ("message", .string(issues.map(\.description).joined(separator: "; "))),
            ("problems", .array(issues.map(\.json))),
        ]))]), status: 400)
    }
}

/// A room change the database refused, for the log behind the 500.
struct RoomStorageFailure: Error, CustomStringConvertible {
    var description: String
}
