import BridgeCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// Sends users' notifications (README "Notifications"): a state-bus subscriber that turns gas,
/// alarms that fired, watchdogs and rooms going offline into one delivery per target of the user,
/// queued (bounded: past `notify.max_queued` a delivery is dropped and counted, so an event never
/// waits), and delivered in `run()`, `notify.concurrency` at a time, each retried with backoff up to
/// `notify.attempts` tries. Logs name a target by its kind and host only: URLs, headers and tokens
/// may hold secrets.
final class Notifier: BridgeFeature, StateSubscriber {
    let name = "notifications"

    struct Delivery: Sendable {
        var user: String
        var target: NotifyTarget
        var notification: UserNotification
    }

    private let targets: [String: [NotifyTarget]]
    private let settings: BridgeConfiguration.Notify
    private let queue: WorkQueue<Delivery>
    private let session: URLSession
    private let logger: Logger
    private let counts = Mutex(HTTPRoutes.NotificationCounts())

    init(users: [User], settings: BridgeConfiguration.Notify, logger: Logger) {
        targets = Dictionary(uniqueKeysWithValues: users.filter { !$0.notify.isEmpty }.map { ($0.id, $0.notify) })
        self.settings = settings
        self.logger = logger
        queue = WorkQueue(capacity: settings.maxQueued)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = settings.timeout
        configuration.timeoutIntervalForResource = settings.timeout
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    /// Sent, failed, retried and dropped deliveries since start (`/metrics`).
    var snapshot: HTTPRoutes.NotificationCounts { counts.withLock { $0 } }

    func receive(_ changes: [StateChange]) {
        guard !targets.isEmpty else { return }
        for change in changes {
            switch change {
            case .event(let user, let event):
                if let notification = UserNotification.about(event) { enqueue(user: user, notification) }
            case .availability(let key, online: false):
                enqueue(user: key.user, UserNotification.offline(room: key.room, at: Date()))
            case .availability, .reading:
                continue
            }
        }
    }

    private func enqueue(user: String, _ notification: UserNotification) {
        for target in targets[user] ?? [] {
            if !queue.submit(Delivery(user: user, target: target, notification: notification)) {
                counts.withLock { $0.dropped += 1 }
                logger.warning("notification dropped: notify.max_queued deliveries are waiting",
                               ["user": user, "target": target.description])
            }
        }
    }

    func run() async {
        let permits = AsyncPermits(count: settings.concurrency)
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                for await delivery in queue.jobs {
                    guard await permits.acquire() else { break }
                    group.addTask {
                        defer { permits.release() }
                        await self.deliver(delivery)
                    }
                }
            }
        } onCancel: {
            permits.cancelAll()
            queue.finish()
        }
    }

    /// Tries one delivery until it succeeds or `notify.attempts` are used up.
    private func deliver(_ delivery: Delivery) async {
        var attempt = 1
        while true {
            let problem = await send(delivery)
            guard let problem else {
                counts.withLock { $0.sent += 1 }
                return
            }
            guard let wait = settings.retry.delay(afterFailedAttempt: attempt), !Task.isCancelled else {
                counts.withLock { $0.failed += 1 }
                logger.warning("notification failed; giving up", ["user": delivery.user, "target": delivery.target.description,
                                                                   "attempts": String(attempt), "problem": problem])
                return
            }
            counts.withLock { $0.retried += 1 }
            logger.info("notification failed; retrying", ["user": delivery.user, "target": delivery.target.description,
                                                          "attempt": String(attempt), "problem": problem,
                                                          "retry_in": String(wait)])
            do { try await Task.sleep(for: .seconds(wait)) } catch {
                counts.withLock { $0.failed += 1 }
                return
            }
            attempt += 1
        }
    }

    /// One request; `nil` on a 2xx answer, else what went wrong (no URL, header or token in it).
    private func send(_ delivery: Delivery) async -> String? {
        let request: URLRequest
        switch delivery.target {
        case .webhook(let url, let headers):
            guard let address = URL(string: url) else { return "bad URL" }
            var webhook = URLRequest(url: address)
            for (name, value) in headers { webhook.setValue(value, forHTTPHeaderField: name) }
            let note = delivery.notification
            webhook.httpBody = Data(JSONValue.object([
                ("user", .string(delivery.user)), ("title", .string(note.title)), ("message", .string(note.message)),
                ("priority", .integer(note.priority)), ("event", note.event),
            ]).bytes)
            request = webhook
        case .ntfy(let url, let topic, let token):
            guard let address = URL(string: url) else { return "bad URL" }
            var publish = URLRequest(url: address)
            if let token { publish.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            publish.httpBody = Data(delivery.notification.ntfyBody(topic: topic).bytes)
            request = publish
        }
        var post = request
        post.httpMethod = "POST"
        post.setValue("application/json", forHTTPHeaderField: "Content-Type")
        do {
            let (_, response) = try await session.data(for: post)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            return (200..<300).contains(status) ? nil : "status \(status)"
        } catch let error as URLError {
            // The code only: URLError's description may repeat the URL.
            return error.code == .timedOut ? "timed out" : "connection failed (URLError \(error.code.rawValue))"
        } catch {
            return "connection failed"
        }
    }
}
