import BridgeCore
import Foundation
import Synchronization

/// Fans the bridge's state changes and events out to `GET /api/v1/events` clients, each only its
/// own user's. Writing never blocks: a client too far behind gets one `overflow` event and is
/// dropped, so a stalled browser can't slow the bridge down.
final class EventHub: BridgeFeature, StateSubscriber {
    let name = "event-streams"
    /// Seconds between heartbeats (README, "Live events").
    static let heartbeatInterval = 15.0

    private struct Stream {
        var sink: any HTTPStreamSink
        /// The id of the session whose token opened it, so revoking the session (here or on another
        /// instance) ends it.
        var session: String
    }

    private let streams = Mutex<[String: [Stream]]>([:])

    /// Adds a client's stream for a user.
    func open(user: String, session: String, sink: any HTTPStreamSink) {
        streams.withLock { $0[user, default: []].append(Stream(sink: sink, session: session)) }
    }

    /// Ends the streams a session opened (it was revoked).
    func close(session: String) {
        let closing = streams.withLock { current in
            current.values.flatMap { $0 }.filter { $0.session == session }.map(\.sink)
        }
        for sink in closing { sink.finish(with: []) }
        prune()
    }

    /// Sends an event to every stream of `user`; `data` is built only if there is one (most
    /// readings have no listener).
    func send(user: String, event name: String, _ data: @autoclosure () -> JSONValue) {
        guard hasStreams(user: user) else { return }
        send(user: user, bytes: ServerSentEvents.event(name, data()))
    }

    /// Whether a user has a client listening.
    func hasStreams(user: String) -> Bool {
        streams.withLock { $0[user]?.isEmpty == false }
    }

    /// Sends an event already in the line format to every stream of `user`.
    func send(user: String, bytes: [UInt8]) {
        let targets = streams.withLock { ($0[user] ?? []).map(\.sink) }
        guard !targets.isEmpty else { return }
        var failed = false
        for sink in targets where !sink.write(bytes) {
            sink.finish(with: ServerSentEvents.overflow)
            failed = true
        }
        if failed { prune() }
    }

    /// The state bus: each published (or mirrored) reading as a `state` event, and every event,
    /// to the user's streams.
    func receive(_ changes: [StateChange]) {
        for change in changes {
            switch change {
            case .reading(let reading) where reading.published || reading.origin == .mirror:
                send(user: reading.key.user, event: "state", JSONValue.object([
                    ("type", .string("state")), ("room", .string(reading.key.room)),
                    ("sensor", .string(reading.sensor.id)), ("value", .string(reading.value.mqttPayload)),
                    ("at", .string(Timestamp.iso8601(reading.time))),
                ]))
            case .event(let user, .relayed(let type, let json)):
                guard hasStreams(user: user), let bytes = ServerSentEvents.event(type, json: json) else { continue }
                send(user: user, bytes: bytes)
            case .event(let user, let event):
                send(user: user, event: event.type, event.json)
            case .reading, .availability:
                continue
            }
        }
    }

    func run() async {
        await run(interval: Self.heartbeatInterval)
    }

    /// Sends a heartbeat comment to every stream every `interval` seconds, which also finds
    /// clients that went away, until cancelled; then ends every stream.
    func run(interval: Double) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) } catch { break }
            let all = streams.withLock { $0.values.flatMap { $0 }.map(\.sink) }
            for sink in all where !sink.write(ServerSentEvents.heartbeat) {
                sink.finish(with: ServerSentEvents.overflow)
            }
            prune()
        }
        let all = streams.withLock { current -> [any HTTPStreamSink] in
            defer { current.removeAll() }
            return current.values.flatMap { $0 }.map(\.sink)
        }
        for sink in all { sink.finish(with: []) }
    }

    /// How many clients are connected (for logs and tests).
    var count: Int { streams.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    private func prune() {
        streams.withLock { current in
            for (user, sinks) in current {
                let open = sinks.filter { !$0.sink.isClosed }
                current[user] = open.isEmpty ? nil : open
            }
        }
    }
}
