import Foundation

/// `/api/v1/alarms` and `/api/v1/rooms/:room/history` (README, "The authenticated API (v1)").
extension HTTPRoutes {
    /// The most history points one request may ask for.
    public static let maxHistoryLimit = 10_000

    func alarmsRoute(_ request: HTTPRequest, method: String, path: [String], user: User) -> HTTPResponse {
        do {
            switch path.count {
            case 1:
                switch method {
                case "GET": return try listAlarms(request, user: user)
                case "POST": return try createAlarm(request, user: user)
                default: return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD, POST")
                }
            case 2:
                guard let alarm = try alarms.alarm(uuid: path[1], userID: user.id) else { return HTTPRoutes.notFound }
                switch method {
                case "GET": return HTTPRoutes.json(schedule.answer(alarm, now: now()))
                case "PUT": return try replaceAlarm(alarm, request, user: user)
                case "DELETE":
                    return try alarms.delete(uuid: alarm.uuid, userID: user.id) ? HTTPResponse(status: 204) : HTTPRoutes.notFound
                default: return HTTPRoutes.methodNotAllowed(allow: "GET, HEAD, PUT, DELETE")
                }
            case 3 where path[2] == "toggle":
                guard method == "POST" else { return HTTPRoutes.methodNotAllowed(allow: "POST") }
                guard var alarm = try alarms.alarm(uuid: path[1], userID: user.id) else { return HTTPRoutes.notFound }
                alarm.isEnabled.toggle()
                return try alarms.update(alarm) ? HTTPRoutes.json(schedule.answer(alarm, now: now())) : HTTPRoutes.notFound
            default:
                return HTTPRoutes.notFound
            }
        } catch {
            return failed(request, error)
        }
    }

    /// Alarms one page lists by default and at most (README "Alarms", paging).
    public static let defaultAlarmPage = 100
    public static let maxAlarmPage = 500

    /// One page of the user's alarms in list order, and `next`, the request for the page after it
    /// (`null` on the last). The order is total (time of day, title, uuid), so pages taken one after
    /// another while nothing changes list every alarm once.
    private func listAlarms(_ request: HTTPRequest, user: User) throws -> HTTPResponse {
        var limit = HTTPRoutes.defaultAlarmPage
        if let text = request.queryValue("limit") {
            guard let value = Int(text), (1...HTTPRoutes.maxAlarmPage).contains(value) else {
                return HTTPRoutes.error(400, "query parameter \"limit\" must be a whole number from 1 to \(HTTPRoutes.maxAlarmPage)")
            }
            limit = value
        }
        var offset = 0
        if let text = request.queryValue("offset") {
            guard let value = Int(text), value >= 0 else {
                return HTTPRoutes.error(400, "query parameter \"offset\" must be a whole number, 0 or more")
            }
            offset = value
        }
        var list = try alarms.alarms(userID: user.id)
        let query = request.queryValue("q") ?? ""
        if !query.isEmpty {
            list = list.filter { $0.title.localizedCaseInsensitiveContains(query) }
        }
        let now = now()
        list.sort { schedule.timeOfDayOrder($0, $1, now: now) }
        let page = list.dropFirst(offset).prefix(limit)
        var next = JSONValue.null
        if offset + page.count < list.count {
            var parameters = "limit=\(limit)&offset=\(offset + page.count)"
            if !query.isEmpty { parameters += "&q=" + HTTPRoutes.queryEncoded(query) }
            next = .string("/api/v1/alarms?" + parameters)
        }
        return HTTPRoutes.json(.object([("alarms", .array(page.map { schedule.answer($0, now: now) })), ("next", next)]))
    }

    /// `text` as a query value: everything but unreserved ASCII percent-encoded.
    static func queryEncoded(_ text: String) -> String {
        text.utf8.map { byte in
            let unreserved = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || [0x2D, 0x2E, 0x5F, 0x7E].contains(byte)
            return unreserved ? String(UnicodeScalar(byte)) : "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
        }.joined()
    }

    private func createAlarm(_ request: HTTPRequest, user: User) throws -> HTTPResponse {
        switch AlarmDraft.parse(request.body, rooms: user.rooms, groups: user.groups, sunKnown: schedule.location != nil) {
        case .failure(let problem):
            return HTTPRoutes.error(400, problem.message)
        case .success(let draft):
            let alarm = draft.alarm(uuid: UUID().uuidString.lowercased(), userID: user.id)
            guard try alarms.create(alarm, maxPerUser: maxAlarmsPerUser) else {
                return HTTPRoutes.error(409, "you have \(maxAlarmsPerUser) alarms, the most alarms.max_per_user allows; "
                    + "delete one first")
            }
            return HTTPRoutes.json(schedule.answer(alarm, now: now()), status: 201)
        }
    }

    private func replaceAlarm(_ existing: Alarm, _ request: HTTPRequest, user: User) throws -> HTTPResponse {
        switch AlarmDraft.parse(request.body, rooms: user.rooms, groups: user.groups, sunKnown: schedule.location != nil) {
        case .failure(let problem):
            return HTTPRoutes.error(400, problem.message)
        case .success(let draft):
            let alarm = draft.alarm(uuid: existing.uuid, userID: user.id)
            return try alarms.update(alarm) ? HTTPRoutes.json(schedule.answer(alarm, now: now())) : HTTPRoutes.notFound
        }
    }

    func historyRoute(_ request: HTTPRequest, room name: String, user: User) -> HTTPResponse {
        guard let room = user.room(named: name) else { return HTTPRoutes.notFound }
        guard let sensorName = request.queryValue("sensor") else {
            return HTTPRoutes.error(400, "query parameter \"sensor\" is required (one of \(room.sensors.map(\.id).joined(separator: ", ")))")
        }
        guard let sensor = SensorKind(name: sensorName), room.sensors.contains(sensor) else {
            return HTTPRoutes.error(400, "query parameter \"sensor\" must be one of \(room.sensors.map(\.id).joined(separator: ", "))")
        }
        var since = Date(timeIntervalSince1970: 0)
        if let text = request.queryValue("since") {
            guard let parsed = Alarm.parseDate(text) else {
                return HTTPRoutes.error(400, "query parameter \"since\" must be an ISO 8601 date and time")
            }
            since = parsed
        }
        var limit = 1000
        if let text = request.queryValue("limit") {
            guard let value = Int(text), (1...HTTPRoutes.maxHistoryLimit).contains(value) else {
                return HTTPRoutes.error(400, "query parameter \"limit\" must be a whole number from 1 to \(HTTPRoutes.maxHistoryLimit)")
            }
            limit = value
        }
        do {
            let points = try history.points(user: user.id, room: room.id, sensor: sensor.id, since: since, limit: limit)
            return HTTPRoutes.json(.object([
                ("sensor", .string(sensor.id)),
                ("points", .array(points.map { .object([("t", .string(Timestamp.iso8601($0.time))), ("v", .string($0.value))]) })),
            ]))
        } catch let timeout as RemoteTimeout {
            return HTTPRoutes.error(504, timeout.description)
        } catch {
            return failed(request, error)
        }
    }
}
