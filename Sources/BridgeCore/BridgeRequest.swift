/// A request on `<base>/bridge/request/<action>` and its answer on `<base>/bridge/response/<action>`
/// (README, "Managing the home"), in zigbee2mqtt's convention: a JSON body with an optional
/// `transaction`, answered `{"status":"ok"|"error","data":…,"error":"…","transaction":…}`, for
/// errors too.
public enum BridgeRequest {
    /// The actions the bridge answers.
    public enum Action: String, Sendable, CaseIterable {
        case roomAdd = "room/add"
        case roomRemove = "room/remove"
        case roomRename = "room/rename"
        case sensorBind = "sensor/bind"
        case configReload = "config/reload"
        case healthCheck = "health_check"

        /// Whether the body names a `user` whose rooms it changes.
        public var needsUser: Bool {
            switch self {
            case .roomAdd, .roomRemove, .roomRename, .sensorBind: true
            case .configReload, .healthCheck: false
            }
        }
    }

    /// A request as read from its topic and payload: the action (nil: unknown), the body, and the
    /// transaction to echo; `problem` when the payload is not a JSON object.
    public struct Parsed {
        public var action: Action?
        public var actionName: String
        public var fields: [String: Any]
        public var transaction: JSONValue?
        public var problem: String?
    }

    /// Reads a request; `topic` is known to start with `prefix` (`<base>/bridge/request/`). An
    /// empty payload is an empty body (`health_check` and `config/reload` need none).
    public static func parse(topic: String, prefix: String, payload: [UInt8]) -> Parsed {
        let name = String(topic.dropFirst(prefix.count))
        var parsed = Parsed(action: Action(rawValue: name), actionName: name, fields: [:])
        guard !payload.isEmpty else { return parsed }
        switch APIBody.object(payload) {
        case .failure(let problem):
            parsed.problem = problem.message
        case .success(var fields):
            parsed.transaction = fields.removeValue(forKey: "transaction").map { ConfigNode.fromJSON($0).json }
            parsed.fields = fields
        }
        if parsed.action == nil, parsed.problem == nil {
            parsed.problem = "unknown action \"\(name)\" (known: \(Action.allCases.map(\.rawValue).joined(separator: ", ")))"
        }
        return parsed
    }

    /// The answer's JSON.
    public static func response(data: JSONValue?, error: String?, transaction: JSONValue?) -> JSONValue {
        var members: [(String, JSONValue)] = [("status", .string(error == nil ? "ok" : "error")), ("data", data ?? .object([]))]
        if let error { members.append(("error", .string(error))) }
        if let transaction { members.append(("transaction", transaction)) }
        return .object(members)
    }

    /// A refused room change as the answer's error and data (every problem with its path).
    public static func failure(_ failure: RoomChangeFailure, user: String, room: String?) -> (error: String, data: JSONValue?) {
        switch failure {
        case .invalid(let issues):
            return (issues.map(\.description).joined(separator: "; "),
                    .object([("problems", .array(issues.map(\.json)))]))
        case .notFound: return ("user \"\(user)\" has no room \"\(room ?? "")\"", nil)
        case .conflict(let message): return (message, nil)
        case .failed: return ("the bridge could not store the change; its log says why", nil)
        }
    }

    /// A room in an answer: its id, name and sensors.
    public static func summary(_ room: Room, user: String) -> JSONValue {
        .object([("user", .string(user)), ("id", .string(room.id)), ("name", .string(room.name)),
                 ("sensors", .strings(room.sensors.map(\.displayName)))])
    }
}
