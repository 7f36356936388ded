import BridgeCore
import BridgeCrypto
import BridgeMQTT
import BridgeStorage
import Foundation
import Synchronization

/// Cluster (issue #11): the history route for any user on any instance. The owner records all of
/// its users' readings, so another instance asks the owner over MQTT
/// (`<base>/bridge/<owner>/history/request`) and waits for the answer on its own reply topic;
/// an owner that does not answer within `cluster.command_timeout` makes the route answer 504.
final class ClusterHistory: HistoryRepository, Sendable {
    /// A history answer (arrays of tuples are not `Sendable` on their own).
    private struct Points: @unchecked Sendable {
        // @unchecked: immutable once built, and handed from one thread to another only once.
        let points: [(time: Date, value: String)]
    }

    private let local: DatabaseHistory
    private let controller: HomeController
    private let logger: Logger
    private let timeout: Double
    private let answers = AwaitedAnswers<String, Points>()

    init(local: DatabaseHistory, controller: HomeController, timeout: Double, logger: Logger) {
        self.local = local
        self.controller = controller
        self.timeout = timeout
        self.logger = logger
    }

    private var topics: Topics { controller.topics }
    private var index: Int { controller.membership.index }

    /// What this instance subscribes to: requests for its users, and answers to its own requests.
    var filters: [String] { [topics.historyRequests(instance: index), topics.historyReplies(instance: index) + "/+"] }

    func points(user: String, room: String, sensor: String, since: Date, limit: Int) throws
        -> [(time: Date, value: String)]
    {
        let membership = controller.membership
        guard !membership.owns(user) else {
            return try local.points(user: user, room: room, sensor: sensor, since: since, limit: limit)
        }
        let id = SessionToken.randomText(bytes: 12)
        let request = HistoryExchange.Request(id: id, replyTo: topics.historyReplies(instance: index) + "/" + id,
                                              user: user, room: room, sensor: sensor, since: since, limit: limit)
        let answer = answers.wait(for: id, timeout: timeout) {
            controller.publish(topics.historyRequests(instance: membership.owner(of: user)), request.json.serialized,
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

    /// Handles requests and answers; returns `false` for any other message.
    func handle(_ message: MQTTMessage) -> Bool {
        if message.topic == topics.historyRequests(instance: index) {
            answer(message)
            return true
        }
        let replies = topics.historyReplies(instance: index) + "/"
        guard message.topic.hasPrefix(replies) else { return false }
        guard let (id, points) = HistoryExchange.parseReply(message.payload) else {
            logger.warning("ignored a malformed history answer", ["topic": message.topic])
            return true
        }
        answers.deliver(Points(points: points), for: id)
        return true
    }

    /// Answers another instance's request for a user this instance owns, off the event loop (a
    /// query of 10,000 points takes a while).
    private func answer(_ message: MQTTMessage) {
        guard let request = HistoryExchange.Request(message.payload, maxLimit: HTTPRoutes.maxHistoryLimit),
              request.replyTo.hasPrefix(topics.base + "/bridge/"), controller.membership.owns(request.user)
        else {
            logger.warning("ignored a malformed history request", ["topic": message.topic])
            return
        }
        let local = local
        let controller = controller
        let logger = logger
        Task.detached {
            do {
                let points = try local.points(user: request.user, room: request.room, sensor: request.sensor,
                                              since: request.since, limit: request.limit)
                controller.publish(request.replyTo, HistoryExchange.reply(id: request.id, points: points).serialized,
                                   retain: false)
            } catch {
                logger.error("cannot read history for another instance", ["error": "\(error)"])
            }
        }
    }
}
