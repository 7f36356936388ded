import Foundation

/// What admins may do (README, "Admins and unbound devices"): list the users, and see the devices
/// that no binding claims.
extension HTTPRoutes {
    func adminRoute(_ request: HTTPRequest, method: String, path: [String], home: Home) -> HTTPResponse {
        switch path {
        case ["devices", "unbound"]:
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            let devices = unboundDevices?() ?? []
            return HTTPRoutes.json(.object([("devices", .array(devices.map(\.json)))]))
        case ["users"]:
            guard method == "GET" else { return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD") }
            return HTTPRoutes.json(.object([("users", .array(home.users.map(Self.userJSON)))]))
        default:
            guard let user = home.user(id: path[1]) else { return HTTPRoutes.notFound }
            switch method {
            case "GET":
                return HTTPRoutes.json(Self.userJSON(user))
            case "PUT", "DELETE":
                // Every user is the config file's today: changing one there keeps file and bridge in step.
                return HTTPRoutes.error(409, "User \(user.id) is defined in the config file"
                    + (configFile.map { " \($0)" } ?? "") + " (users[]): change it there")
            default:
                return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD, PUT, DELETE")
            }
        }
    }

    /// A user as admins see it: never the password hash.
    static func userJSON(_ user: User) -> JSONValue {
        .object([
            ("id", .string(user.id)), ("username", .string(user.username)), ("admin", .bool(user.isAdmin)),
            ("rooms", .strings(user.rooms.map(\.id))), ("source", .string("config")),
        ])
    }
}
