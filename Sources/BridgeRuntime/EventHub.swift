import BridgeCore
import Foundation
import Synchronization

/// Fans the bridge's state changes and events out to `GET /api/v1/events` clients, each only its
/// own user's. Writing never blocks: a client too far behind gets one `overflow` event and is
/// dropped, so a stalled browser can't slow the bridge down.
///
/// Streams are bounded per session and per user (README "Live events"), so one token can't hold the
/// server's connections; a stream ends when its session is revoked or expires.
final class EventHub: BridgeFeature, StateSubscriber {
    let name = "event-streams"
    /// Seconds between heartbeats (README, "Live events").
    static let heartbeatInterval = 15.0


    /// How many streams one session (token) and one user may hold at once.
    struct Limits: Sendable {
        var perSession = 8
        var perUser = 16
        /// All of one user's guests together, beside the user's own `perUser`.
        var perGuests: Int { max(1, perUser / 2) }
    }

    private struct Stream {
        /// `nil` while the place is held and the server has not yet attached the client.
        var sink: (any HTTPStreamSink)?
        /// The id of the session whose token opened it, so revoking the session (here or on another
        /// instance) ends it.
        var session: String
        /// Unix seconds: the session's expiry, when the stream ends too.
        var expiresAt: Int64
        /// Tells the places of one user apart.
        var number: UInt64
        /// A guest's stream (README, "Guests"): only these rooms' readings and events; `nil` for the user's own.
        var rooms: Set<String>?

        /// Whether an event about `room` (`nil`: about no room, e.g. an alarm) goes to this stream.
        func carries(room: String?) -> Bool {
            guard let rooms else { return true }
            return room.map(rooms.contains) ?? false
        }
    }

    private struct State {
        var streams: [String: [Stream]] = [:]
        var nextNumber: UInt64 = 0
    }

    let limits: Limits
    private let state = Mutex(State())
    private let now: @Sendable () -> Date

    init(limits: Limits = Limits(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.limits = limits
        self.now = now
    }

    /// Holds a place for a stream of `session`, or refuses when the session or its user has too many.
    /// Check and reservation happen under one lock, so parallel requests can't exceed the limits.
    func open(_ session: SessionServices.Session) -> EventStreamOpening {
        let isGuest = session.guest != nil
        let number = state.withLock { state -> UInt64? in
            // A user's guests share half the user's places, apart from the user's own, so guests can't
            // keep the user from following the home (README, "Guests").
            let mine = (state.streams[session.userID] ?? []).filter { ($0.rooms != nil) == isGuest }
            guard mine.count < (isGuest ? limits.perGuests : limits.perUser),
                  mine.count(where: { $0.session == session.id }) < limits.perSession else { return nil }
            state.nextNumber += 1
            state.streams[session.userID, default: []].append(
                Stream(sink: nil, session: session.id, expiresAt: session.expiresAt, number: state.nextNumber,
                       rooms: session.guest.map { Set($0.rooms) }))
            return state.nextNumber
        }
        guard let number else {
            return .refused("Too many event streams for this token or user (at most \(limits.perSession) per "
                + "token, \(limits.perUser) per user, \(limits.perGuests) for all of a user's guests); close one first")
        }
        let place = Place(hub: self, user: session.userID, number: number)
        return .accepted { sink in place.attach(sink) }
    }

    /// Ends the streams a session opened (it was revoked).
    func close(session: String) {
        end { $0.session == session }
    }

    /// Ends every stream of a user (logged out everywhere).
    func close(user: String) {
        let closing = state.withLock { ($0.streams[user] ?? []).compactMap(\.sink) }
        for sink in closing { sink.finish(with: []) }
        prune()
    }

    /// Sends an event to every stream of `user` that carries `room`; `data` is built only if there is
    /// one (most readings have no listener).
    func send(user: String, room: String?, event name: String, _ data: @autoclosure () -> JSONValue) {
        guard hasStreams(user: user) else { return }
        send(user: user, room: room, bytes: ServerSentEvents.event(name, data()))
    }

    /// Whether a user has a client listening.
    func hasStreams(user: String) -> Bool {
        state.withLock { $0.streams[user]?.contains { $0.sink != nil } == true }
    }

    /// Sends an event already in the line format to every stream of `user` that carries `room`.
    func send(user: String, room: String?, bytes: [UInt8]) {
        let targets = state.withLock { ($0.streams[user] ?? []).filter { $0.carries(room: room) }.compactMap(\.sink) }
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
                send(user: reading.key.user, room: reading.key.room, event: "state", JSONValue.object([
                    ("type", .string("state")), ("room", .string(reading.key.room)),
                    ("sensor", .string(reading.sensor.id)), ("value", .string(reading.value.mqttPayload)),
                    ("at", .string(Timestamp.iso8601(reading.time))),
                ]))
            case .event(let user, .relayed(let type, let json)):
                guard hasStreams(user: user), let bytes = ServerSentEvents.event(type, json: json) else { continue }
                send(user: user, room: nil, bytes: bytes)
            case .event(let user, let event):
                send(user: user, room: event.room, event: event.type, event.json)
            case .reading, .availability:
                continue
            }
        }
    }

    func run() async {
        await run(interval: Self.heartbeatInterval)
    }

    /// Every second ends the streams whose session has expired; every `interval` seconds sends a
    /// heartbeat comment to every stream, which also finds clients that went away. Until cancelled;
    /// then ends every stream.
    func run(interval: Double) async {
        var sinceHeartbeat = 0.0
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(1)) } catch { break }
            endExpired()
            sinceHeartbeat += 1
            guard sinceHeartbeat >= interval else { continue }
            sinceHeartbeat = 0
            let all = state.withLock { $0.streams.values.flatMap { $0 }.compactMap(\.sink) }
            for sink in all where !sink.write(ServerSentEvents.heartbeat) {
                sink.finish(with: ServerSentEvents.overflow)
            }
            prune()
        }
        let all = state.withLock { state -> [any HTTPStreamSink] in
            defer { state.streams.removeAll() }
            return state.streams.values.flatMap { $0 }.compactMap(\.sink)
        }
        for sink in all { sink.finish(with: []) }
    }

    /// Ends the streams of sessions that have expired, with a last `session_expired` event.
    func endExpired() {
        let second = Int64(now().timeIntervalSince1970)
        end(with: ServerSentEvents.sessionExpired) { $0.expiresAt <= second }
    }

    /// How many clients are connected (for logs and tests).
    var count: Int { state.withLock { $0.streams.values.reduce(0) { $0 + $1.count { $0.sink != nil } } } }

    private func end(with last: [UInt8] = [], where matches: (Stream) -> Bool) {
        let closing = state.withLock { state in
            state.streams.values.flatMap { $0 }.filter(matches).compactMap(\.sink)
        }
        for sink in closing { sink.finish(with: last) }
        prune()
    }

    /// Drops ended streams; places not yet attached stay until attached or given up.
    private func prune() {
        state.withLock { state in
            for (user, streams) in state.streams {
                let open = streams.filter { $0.sink.map { !$0.isClosed } ?? true }
                state.streams[user] = open.isEmpty ? nil : open
            }
        }
    }

    fileprivate func attach(_ sink: any HTTPStreamSink, user: String, number: UInt64) {
        let held = state.withLock { state -> Bool in
            guard let index = state.streams[user]?.firstIndex(where: { $0.number == number }) else { return false }
            state.streams[user]?[index].sink = sink
            return true
        }
        // The bridge is stopping (`run` has let go of every stream): this one ends too.
        if !held { sink.finish(with: []) }
    }

    fileprivate func release(user: String, number: UInt64) {
        state.withLock { state in
            state.streams[user]?.removeAll { $0.number == number && $0.sink == nil }
            if state.streams[user]?.isEmpty == true { state.streams[user] = nil }
        }
    }
}

/// A place held for one stream. The server calls `attach` once the answer is queued; if it never does (the
/// client went away, or the server had no stream slot left), the place is freed when this goes away.
private final class Place: Sendable {
    private let hub: EventHub
    private let user: String
    private let number: UInt64
    private let attached = Atomic<Bool>(false)

    init(hub: EventHub, user: String, number: UInt64) {
        self.hub = hub
        self.user = user
        self.number = number
    }

    func attach(_ sink: any HTTPStreamSink) {
        guard !attached.exchange(true, ordering: .acquiringAndReleasing) else { return }
        hub.attach(sink, user: user, number: number)
    }

    deinit {
        if !attached.load(ordering: .acquiring) { hub.release(user: user, number: number) }
    }
}
