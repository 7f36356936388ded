import BridgeCore
import BridgeMQTT
import Foundation

/// Requests over MQTT (README, "Managing the home"): `<base>/bridge/request/<action>` with a JSON
/// body, answered on `<base>/bridge/response/<action>` with the request's `transaction`, errors
/// included. Room changes go through the same `RoomManagement` as the API. Who may publish there
/// is the broker's business: `smarthome-bridge mosquitto-acl` allows only the bridge's account
/// and admins. Requests are queued off the event loop (bounded) and run one at a time in `run()`.
final class BridgeRequests: BridgeFeature {
    let name = "requests"

    /// Requests waiting to run; more are answered "busy" at once.
    static let capacity = 32

    /// What `config/reload` does (README, "Managing the home", "Reload"): the answer's data, or
    /// the error and its data.
    typealias Reload = @Sendable () async -> Result<JSONValue, ReloadFailure>

    struct ReloadFailure: Error {
        var message: String
        var data: JSONValue?
    }

    private struct Job: Sendable {
        var topic: String
        var payload: [UInt8]
    }

    private let topics: Topics
    private let rooms: any RoomManagement
    private let store: HomeStore
    private let outbound: Outbound
    private let broker: any BrokerLink
    private let startedAt: Date
    private let logger: Logger
    private let reload: Reload
    private let queue = WorkQueue<Job>(capacity: BridgeRequests.capacity)

    init(topics: Topics, rooms: any RoomManagement, store: HomeStore, outbound: Outbound, broker: any BrokerLink,
         startedAt: Date, logger: Logger, reload: @escaping Reload) {
        self.topics = topics
        self.rooms = rooms
        self.store = store
        self.outbound = outbound
        self.broker = broker
        self.startedAt = startedAt
        self.logger = logger
        self.reload = reload
    }

    var subscriptions: [MQTTSubscription] { [MQTTSubscription(filter: topics.bridgeRequests, qos: 1)] }

    func handle(_ message: MQTTMessage) {
        // A retained request would run again at every connect: requests are never retained.
        if message.retain {
            logger.warning("ignored a retained bridge request; clear it with an empty retained message",
                           ["topic": message.topic])
            return
        }
        guard !queue.submit(Job(topic: message.topic, payload: message.payload)) else { return }
        let parsed = BridgeRequest.parse(topic: message.topic, prefix: topics.bridgeRequestPrefix, payload: message.payload)
        answer(parsed, error: "too many requests waiting (\(Self.capacity)); try again", data: nil)
    }

    func run() async {
        for await job in queue.jobs {
            if Task.isCancelled { break }
            await execute(BridgeRequest.parse(topic: job.topic, prefix: topics.bridgeRequestPrefix, payload: job.payload))
        }
    }

    func shutdown() async {
        queue.finish()
    }

    private func execute(_ request: BridgeRequest.Parsed) async {
        if let problem = request.problem { return answer(request, error: problem, data: nil) }
        guard let action = request.action else { return }
        var user = ""
        if action.needsUser {
            guard let given = request.fields["user"] as? String, !given.isEmpty else {
                return answer(request, error: "field \"user\" is required (a user id from the config file)", data: nil)
            }
            guard store.home.user(id: given) != nil else {
                return answer(request, error: "unknown user \"\(given)\"", data: nil)
            }
            user = given
        }
        var fields = request.fields
        fields["user"] = nil
        let room = fields.removeValue(forKey: "room") as? String
        if [.roomRemove, .roomRename, .sensorBind].contains(action), room == nil {
            return answer(request, error: "field \"room\" is required (the room's id or name)", data: nil)
        }
        switch action {
        case .roomAdd:
            finish(request, rooms.create(user: user, fields), user: user, room: fields["name"] as? String)
        case .roomRename:
            guard fields["name"] != nil else { return answer(request, error: "field \"name\" is required", data: nil) }
            finish(request, rooms.update(user: user, room: room!, ["name": fields["name"]!]), user: user, room: room)
        case .sensorBind:
            guard let sensor = fields["sensor"] else {
                return answer(request, error: "field \"sensor\" is required (an entry of a room's sensors)", data: nil)
            }
            finish(request, rooms.bind(user: user, room: room!, sensor: sensor), user: user, room: room)
        case .roomRemove:
            switch rooms.delete(user: user, room: room!) {
            case .success: answer(request, error: nil, data: .object([("user", .string(user)), ("room", .string(room!))]))
            case .failure(let failure):
                let (error, data) = BridgeRequest.failure(failure, user: user, room: room)
                answer(request, error: error, data: data)
            }
        case .configReload:
            switch await reload() {
            case .success(let data): answer(request, error: nil, data: data)
            case .failure(let failure): answer(request, error: failure.message, data: failure.data)
            }
        case .healthCheck:
            answer(request, error: nil, data: .object([
                ("healthy", .bool(broker.isConnected)),
                ("uptimeSeconds", .integer(Int(Date().timeIntervalSince(startedAt)))),
                ("rooms", .integer(store.home.users.reduce(0) { $0 + $1.rooms.count })),
            ]))
        }
    }

    private func finish(_ request: BridgeRequest.Parsed, _ result: Result<Room, RoomChangeFailure>, user: String,
                        room: String?) {
        switch result {
        case .success(let changed): answer(request, error: nil, data: BridgeRequest.summary(changed, user: user))
        case .failure(let failure):
            let (error, data) = BridgeRequest.failure(failure, user: user, room: room)
            answer(request, error: error, data: data)
        }
    }

    private func answer(_ request: BridgeRequest.Parsed, error: String?, data: JSONValue?) {
        if let error {
            logger.info("bridge request refused", ["action": request.actionName, "error": error])
        } else {
            logger.info("bridge request done", ["action": request.actionName])
        }
        let response = BridgeRequest.response(data: data, error: error, transaction: request.transaction)
        outbound.send(topics.bridgeResponse(request.actionName), response.serialized, retain: false)
    }
}
