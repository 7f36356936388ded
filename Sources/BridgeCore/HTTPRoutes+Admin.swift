import Foundation

/// What admins may do (README, "Admins and unbound devices"): list the users, make users of the
/// API's own (config users are changed in the file), and see the devices no binding claims.
extension HTTPRoutes {
    func adminRoute(_ request: HTTPRequest, method: String, path: [String], home: Home) -> HTTPResponse {
        switch path {
        case _ where path.matches("devices", "unbound"):
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            let devices = unboundDevices?() ?? []
            return HTTPRoutes.json(.object([("devices", .array(devices.map(\.json)))]))
        case _ where path.matches("users"):
            switch method {
            case "GET": return HTTPRoutes.json(.object([("users", .array(home.users.map(userJSON)))]))
            case "POST" where users != nil: return changeUser(request) { users, body in
                UserDraft.parse(body, creating: true).map { draft in { try users.create(draft) } }
            }
            default: return HTTPRoutes.methodNotAllowed(allow: users == nil ? "GET, HEAD" : "GET, HEAD, POST")
            }
        default:
            guard let user = home.user(id: path[1]) else { return HTTPRoutes.notFound }
            switch method {
            case "GET":
                return HTTPRoutes.json(userJSON(user))
            case "PUT", "DELETE":
                guard users?.isManaged(user.id) == true else {
                    // A config user is changed in the file, which keeps file and bridge in step.
                    return HTTPRoutes.error(409, "User \(user.id) is defined in the config file"
                        + (configFile.map { " \($0)" } ?? "") + " (users[]): change it there")
                }
                if method == "DELETE" {
                    return changeUser(request, status: 204) { users, _ in .success({ try users.delete(user.id) }) }
                }
                return changeUser(request) { users, body in
                    UserDraft.parse(body, creating: false).map { draft in { try users.update(user.id, draft) } }
                }
            default:
                return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD, PUT, DELETE")
            }
        }
    }

    /// Parses with `prepare`, runs what it gives, and answers: 201/200 the user (or `status`), 400, 404, 409.
    private func changeUser(
        _ request: HTTPRequest, status: Int? = nil,
        _ prepare: (UserServices, [UInt8]) -> Result<() throws -> UserServices.Outcome, APIBody.Problem>
    ) -> HTTPResponse {
        guard let users else { return HTTPRoutes.notFound }
        switch prepare(users, request.body) {
        case .failure(let problem):
            return HTTPRoutes.error(400, problem.message)
        case .success(let change):
            do {
                switch try change() {
                case .done(let user):
                    if status == 204 { return HTTPResponse(status: 204) }
                    return HTTPRoutes.json(userJSON(user), status: request.method == "POST" ? 201 : 200)
                case .conflict(let message): return HTTPRoutes.error(409, message)
                case .notFound: return HTTPRoutes.notFound
                }
            } catch {
                return failed(request, error)
            }
        }
    }

    /// A user as admins see it: never the password hash; `source` says whether the config file or
    /// the API made it.
    func userJSON(_ user: User) -> JSONValue {
        .object([
            ("id", .string(user.id)), ("username", .string(user.username)), ("admin", .bool(user.isAdmin)),
            ("rooms", .strings(user.rooms.map(\.id))),
            ("source", .string(users?.isManaged(user.id) == true ? "api" : "config")),
        ])
    }
}
