import Foundation

/// `/api/v1/watchdogs` (README "Watchdogs"): CRUD like the alarms, capped per user.
extension HTTPRoutes {
    func watchdogsRoute(_ request: HTTPRequest, method: String, path: [String], user: User) -> HTTPResponse {
        guard let watchdogs else { return HTTPRoutes.notFound }
        do {
            switch path.count {
            case 1:
                switch method {
                case "GET":
                    let list = try watchdogs.watchdogs(userID: user.id).map(HTTPRoutes.watchdogAnswer)
                    return HTTPRoutes.json(.object([("watchdogs", .array(list))]))
                case "POST": return try createWatchdog(request, user: user, in: watchdogs)
                default: return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD, POST")
                }
            case 2:
                guard let (watchdog, state) = try watchdogs.watchdog(uuid: path[1], userID: user.id) else {
                    return HTTPRoutes.notFound
                }
                switch method {
                case "GET": return HTTPRoutes.json(HTTPRoutes.watchdogAnswer(watchdog, state))
                case "PUT":
                    switch WatchdogDraft.parse(request.body, rooms: user.rooms) {
                    case .failure(let problem): return HTTPRoutes.error(400, problem.message)
                    case .success(let draft):
                        let changed = draft.watchdog(uuid: watchdog.uuid, userID: user.id)
                        guard let state = try watchdogs.update(changed) else { return HTTPRoutes.notFound }
                        return HTTPRoutes.json(HTTPRoutes.watchdogAnswer(changed, state))
                    }
                case "DELETE":
                    return try watchdogs.delete(uuid: watchdog.uuid, userID: user.id)
                        ? HTTPResponse(status: 204) : HTTPRoutes.notFound
                default: return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD, PUT, DELETE")
                }
            case 3 where path[2] == "toggle":
                guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
                guard var (watchdog, _) = try watchdogs.watchdog(uuid: path[1], userID: user.id) else {
                    return HTTPRoutes.notFound
                }
                watchdog.isEnabled.toggle()
                guard let state = try watchdogs.update(watchdog) else { return HTTPRoutes.notFound }
                return HTTPRoutes.json(HTTPRoutes.watchdogAnswer(watchdog, state))
            default:
                return HTTPRoutes.notFound
            }
        } catch {
            return failed(request, error)
        }
    }

    private func createWatchdog(_ request: HTTPRequest, user: User, in watchdogs: any WatchdogRepository) throws
        -> HTTPResponse
    {
        switch WatchdogDraft.parse(request.body, rooms: user.rooms) {
        case .failure(let problem):
            return HTTPRoutes.error(400, problem.message)
        case .success(let draft):
            guard try watchdogs.count(userID: user.id) < maxWatchdogsPerUser else {
                return HTTPRoutes.error(409, "you have \(maxWatchdogsPerUser) watchdogs, the most watchdogs.max_per_user "
                    + "allows; delete one first")
            }
            let watchdog = draft.watchdog(uuid: UUID().uuidString.lowercased(), userID: user.id)
            let state = try watchdogs.create(watchdog)
            return HTTPRoutes.json(HTTPRoutes.watchdogAnswer(watchdog, state), status: 201)
        }
    }

    /// A watchdog's fields and its episode's `state` (`armed`/`fired`) and `firedAt`.
    static func watchdogAnswer(_ watchdog: Watchdog, _ state: WatchdogState) -> JSONValue {
        guard case .object(let members) = watchdog.json else { return watchdog.json }
        return .object(members + state.members)
    }
}
