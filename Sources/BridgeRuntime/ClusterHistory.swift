import BridgeCore
import BridgeCrypto
import BridgeMQTT
import BridgeStorage
import Foundation
import Synchronization

/// Cluster (docs/scaling.md): the history route for any user on any instance. The owner records all of
/// its users' readings, so another instance asks the owner over MQTT
/// (`<base>/bridge/<owner>/history/request`) and waits for the answer on its own reply topic;
/// an owner that does not answer within `cluster.command_timeout` makes the route answer 504.
final class ClusterHistory: HistoryRepository, BridgeFeature {
    let name = "cluster-history"
    /// Requests from other instances waiting to be answered at most; more are dropped (and logged).
    static let maxWaiting = 64

    /// A history answer (arrays of tuples are not `Sendable` on their own).
    private struct Points: @unchecked Sendable {
        // @unchecked: immutable once built, and handed from one thread to another only once.
        let points: [(time: Date, value: String)]
    }

    private let local: DatabaseHistory
    private let membership: ClusterMembership
    private let topics: Topics
    private let outbound: Outbound
    private let logger: Logger
    private let timeout: Double
    private let answers = AwaitedAnswers<String, Points>()
    private let requests = WorkQueue<HistoryExchange.Request>(capacity: ClusterHistory.maxWaiting)

    init(local: DatabaseHistory, membership: ClusterMembership, topics: Topics, outbound: Outbound, timeout: Double,
         logger: Logger) {
        self.local = local
        self.membership = membership
        self.topics = topics
        self.outbound = outbound
        self.timeout = timeout
        self.logger = logger
    }

    private var index: Int { membership.index }

    /// Requests for this instance's users, and answers to its own requests.
    var subscriptions: [MQTTSubscription] {
        [MQTTSubscription(filter: topics.historyRequests(instance: index), qos: 0),
         MQTTSubscription(filter: topics.historyReplies(instance: index) + "/+", qos: 0)]
    }

    func points(user: String, room: String, sensor: String, since: Date, limit: Int) throws
        -> [(time: Date, value: String)]
    {
        guard !membership.owns(user) else {
            return try local.points(user: user, room: room, sensor: sensor, since: since, limit: limit)
        }
        let id = SessionToken.randomText(bytes: 12)
        let request = HistoryExchange.Request(id: id, replyTo: topics.historyReplies(instance: index) + "/" + id,
                                              user: user, room: room, sensor: sensor, since: since, limit: limit)
        let answer = answers.wait(for: id, timeout: timeout) {
            outbound.send(topics.historyRequests(instance: membership.owner(of: user)), request.json.serialized,
                          retain: false)
        }
        guard let points = answer?.points else {
            logger.warning("the owning instance did not answer a history request",
                           ["user": user, "owner": String(membership.owner(of: user))])
            throw RemoteTimeout("the bridge instance that owns this user did not answer within "
                + "\(Int(timeout.rounded(.up))) s")
        }
        return points
    }

    func handle(_ message: MQTTMessage) {
        if message.topic == topics.historyRequests(instance: index) {
            guard let request = HistoryExchange.Request(message.payload, maxLimit: HTTPRoutes.maxHistoryLimit),
                  request.replyTo.hasPrefix(topics.base + "/bridge/"), membership.owns(request.user)
            else {
                logger.warning("ignored a malformed history request", ["topic": message.topic])
                return
            }
            if !requests.submit(request) {
                logger.warning("too many history requests waiting; dropped one", ["user": request.user])
            }
            return
        }
        guard let (id, points) = HistoryExchange.parseReply(message.payload) else {
            logger.warning("ignored a malformed history answer", ["topic": message.topic])
            return
        }
        answers.deliver(Points(points: points), for: id)
    }

    /// Answers other instances' requests, off the event loop (a query of 10,000 points takes a
    /// while), one at a time.
    func run() async {
        for await request in requests.jobs {
            do {
                let points = try local.points(user: request.user, room: request.room, sensor: request.sensor,
                                              since: request.since, limit: request.limit)
                outbound.send(request.replyTo, HistoryExchange.reply(id: request.id, points: points).serialized,
                              retain: false)
            } catch {
                logger.error("cannot read history for another instance", ["error": "\(error)"])
            }
        }
    }
}
