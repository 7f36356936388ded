import BridgeCore
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `source.kind: rest`: polls `GET {base_url}/rooms/{userID}/{Room}` for every room of the users it
/// is given (those this instance owns), each room on its own schedule (spread over the interval,
/// backing off on failure), at most `source.concurrency` requests in flight. A broken room never
/// delays the others.
final class RestSource: Source {
    let name = "rest"
    private let configuration: BridgeConfiguration
    private let controller: HomeController
    private let logger: Logger
    private let client: UpstreamClient
    private let permits: AsyncPermits

    /// The rooms polled now and those with a poller running. A poller ends when its room is no
    /// longer polled (it went, or its user moved to another instance: docs/scaling.md, "Leases");
    /// `run()` starts pollers for rooms that came. One lock, so a room never has two pollers.
    private struct Polled {
        var rooms: [RoomKey: (user: User, room: Room)] = [:]
        var order: [RoomKey] = []
        var running: Set<RoomKey> = []
    }

    private let polled: Mutex<Polled>
    private let reshaped = CoalescedSignal()

    init(configuration: BridgeConfiguration, controller: HomeController, client: UpstreamClient, logger: Logger) {
        self.configuration = configuration
        self.controller = controller
        self.client = client
        self.logger = logger
        permits = AsyncPermits(count: configuration.source.concurrency)
        polled = Mutex(Self.polled(configuration.users))
    }

    private static func polled(_ users: [User]) -> Polled {
        var polled = Polled()
        for user in users {
            for room in user.rooms {
                let key = RoomKey(user: user.id, room: room.id)
                if polled.rooms.updateValue((user, room), forKey: key) == nil { polled.order.append(key) }
            }
        }
        return polled
    }

    /// The rooms polled now.
    var rooms: Set<RoomKey> { polled.withLock { Set($0.rooms.keys) } }

    /// The upstream takes light commands when `source.lights_command` says how.
    var lightSwitch: (any LightSwitch)? { configuration.source.lightsCommand.path == nil ? nil : client }

    /// Devices read the bound sensors; the upstream's values for them are not taken.
    private func isBound(_ sensor: SensorKind, in room: Room) -> Bool { room.bindings[sensor] != nil }

    /// Polled rooms start with their lights off until the upstream or the database says otherwise.
    func initialReadings() -> [Reading] {
        Self.lightsOff(configuration.users)
    }

    private static func lightsOff(_ users: [User]) -> [Reading] {
        users.flatMap { user in
            user.rooms.filter { $0.unboundSensors.contains(.lights) }.map {
                Reading(user: user.id, room: $0.id, sensor: .lights, value: .binary(false))
            }
        }
    }

    /// Polls `users`' rooms from now on (rooms changed, or leases moved); rooms that stay keep
    /// their poller and its schedule.
    func roomsChanged(_ users: [User]) -> [Reading] {
        let next = Self.polled(users)
        let new = polled.withLock { current -> Set<RoomKey> in
            let new = Set(next.rooms.keys).subtracting(current.rooms.keys)
            current.rooms = next.rooms
            current.order = next.order
            return new
        }
        reshaped.request()
        return Self.lightsOff(users).filter { new.contains(RoomKey(user: $0.user, room: $0.room)) }
    }

    /// Polls until cancelled.
    func run() async {
        let source = configuration.source
        logger.info("polling the upstream", ["base_url": source.baseURL ?? "",
                                             "rooms": String(polled.withLock { $0.rooms.count }),
                                             "interval": String(source.interval)])
        if source.lightsCommand.path == nil {
            logger.info("source.lights_command is not set: the bridge keeps each light's state itself and "
                + "overlays it on the upstream's values")
        }
        await withDiscardingTaskGroup { group in
            var reshapes = reshaped.requests.makeAsyncIterator()
            repeat {
                // Spread the rooms that came across the interval instead of polling them all at once.
                let start = Monotonic.now
                let starting = polled.withLock { polled -> [(RoomKey, Double)] in
                    let count = max(polled.order.count, 1)
                    return polled.order.enumerated().compactMap { index, key in
                        polled.running.insert(key).inserted ? (key, source.interval * Double(index) / Double(count)) : nil
                    }
                }
                for (key, offset) in starting {
                    group.addTask { await self.pollForever(key, firstPoll: start + offset) }
                }
            } while await reshapes.next() != nil && !Task.isCancelled
            group.cancelAll()
        }
        permits.cancelAll()
    }

    /// The room `key` as polled now; nil (and the poller marked as ended) when it is no longer polled.
    private func stillPolled(_ key: RoomKey) -> (user: User, room: Room)? {
        polled.withLock { polled in
            guard let current = polled.rooms[key] else {
                polled.running.remove(key)
                return nil
            }
            return current
        }
    }

    private func pollForever(_ key: RoomKey, firstPoll: Double) async {
        let source = configuration.source
        var schedule = PollSchedule(interval: source.interval, maxBackoff: source.maxBackoff,
                                    failuresBeforeOffline: source.failuresBeforeOffline, firstPoll: firstPoll)
        while !Task.isCancelled {
            let wait = schedule.nextPoll - Monotonic.now
            if wait > 0 {
                do { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) } catch { return }
            }
            guard let current = stillPolled(key) else { return }
            let (user, room) = current
            guard await permits.acquire() else { return }
            let started = Monotonic.now
            let outcome = await client.room(user: user.id, name: room.name)
            permits.release()
            switch outcome.flatMap({ body in SeedRoomParser.parse(body).mapError { UpstreamFailure(problem: $0.description, body: body) } }) {
            case .success(let readings):
                let change = schedule.succeeded(start: started)
                if change.worthLogging { logger.info("upstream room answers again", ["user": user.id, "room": room.id]) }
                if change.availabilityChanged { controller.setAvailability(key, online: true) }
                let keepOwnLights = source.lightsCommand.path == nil
                controller.record(readings.compactMap { reading in
                    (keepOwnLights && reading.sensor == .lights) || isBound(reading.sensor, in: room)
                        ? nil : Reading(user: user.id, room: room.id, sensor: reading.sensor, value: reading.value)
                })
            case .failure(let failure):
                let change = schedule.failed(start: started, problem: failure.problem)
                if change.worthLogging {
                    logger.warning("upstream poll failed", ["user": user.id, "room": room.id, "problem": failure.problem,
                                                           "body": failure.excerpt,
                                                           "failures": String(schedule.consecutiveFailures)])
                }
                if change.availabilityChanged {
                    logger.warning("room offline after repeated upstream failures; keeping its last values",
                                   ["user": user.id, "room": room.id])
                    controller.setAvailability(key, online: false)
                }
            }
        }
    }
}

/// A failed poll or command: what went wrong, and the start of the body for the log.
struct UpstreamFailure: Error {
    var problem: String
    var body: [UInt8] = []
    var status = 0

    /// Up to 80 printable characters of the body.
    var excerpt: String {
        let text = String(decoding: body.prefix(80), as: UTF8.self)
        return String(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? "?" : Character($0) })
    }
}

/// HTTP to the upstream: polls and forwarded light commands.
struct UpstreamClient: LightSwitch {
    let baseURL: String
    let session: URLSession
    let lightsCommand: BridgeConfiguration.LightsCommand

    init(source: BridgeConfiguration.Source) {
        baseURL = (source.baseURL ?? "").hasSuffix("/") ? String((source.baseURL ?? "").dropLast()) : source.baseURL ?? ""
        lightsCommand = source.lightsCommand
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = source.timeout
        configuration.timeoutIntervalForResource = source.timeout
        configuration.httpMaximumConnectionsPerHost = source.concurrency
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    /// Path segments are percent-encoded so a display name with spaces still makes a valid URL.
    static func segment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? text
    }

    func room(user: String, name: String) async -> Result<[UInt8], UpstreamFailure> {
        guard let url = URL(string: "\(baseURL)/rooms/\(Self.segment(user))/\(Self.segment(name))") else {
            return .failure(UpstreamFailure(problem: "cannot build a URL from source.base_url"))
        }
        return await send(URLRequest(url: url))
    }

    func switchLight(_ target: CommandTarget, on: Bool) async -> Result<SwitchOutcome, CommandRejection> {
        await forwardLights(user: target.user.id, room: target.room, on: on).map { .accepted }
    }

    /// Forwards a light command with `source.lights_command`; `{userID}`, `{room}` (display name),
    /// `{roomID}` and `{state}` (`ON`/`OFF`) are filled in.
    func forwardLights(user: String, room: Room, on: Bool) async -> Result<Void, CommandRejection> {
        guard let template = lightsCommand.path else { return .success(()) }
        let state = on ? "ON" : "OFF"
        let path = template.replacing("{userID}", with: Self.segment(user)).replacing("{room}", with: Self.segment(room.name))
            .replacing("{roomID}", with: Self.segment(room.id)).replacing("{state}", with: state)
        guard let url = URL(string: baseURL + (path.hasPrefix("/") ? path : "/" + path)) else {
            return .failure(.upstream(status: 0, detail: "cannot build a URL from source.lights_command.path"))
        }
        var request = URLRequest(url: url)
        request.httpMethod = lightsCommand.method
        if let body = lightsCommand.body {
            request.httpBody = Data(body.replacing("{userID}", with: user).replacing("{room}", with: room.name)
                .replacing("{roomID}", with: room.id).replacing("{state}", with: state).utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        switch await send(request) {
        case .success: return .success(())
        case .failure(let failure): return .failure(.upstream(status: failure.status, detail: failure.problem))
        }
    }

    private func send(_ request: URLRequest) async -> Result<[UInt8], UpstreamFailure> {
        do {
            let (data, response) = try await session.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            guard (200..<300).contains(status) else {
                return .failure(UpstreamFailure(problem: "status \(status)", body: Array(data), status: status))
            }
            return .success(Array(data))
        } catch let error as URLError where error.code == .timedOut {
            return .failure(UpstreamFailure(problem: "timed out"))
        } catch {
            return .failure(UpstreamFailure(problem: "connection failed: \(error.localizedDescription)"))
        }
    }
}

/// Seconds on a monotonic clock, shared by the pollers.
enum Monotonic {
    private static let origin = ContinuousClock.now

    static var now: Double {
        let elapsed = ContinuousClock.now - origin
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
