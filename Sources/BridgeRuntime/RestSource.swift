import BridgeCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `source.kind: rest`: polls `GET {base_url}/rooms/{userID}/{Room}` for every room, each room on
/// its own schedule (spread over the interval, backing off on failure), at most
/// `source.concurrency` requests in flight. A broken room never delays the others.
final class RestSource: Source {
    let name = "rest"
    private let configuration: BridgeConfiguration
    private let controller: HomeController
    private let logger: Logger
    private let client: UpstreamClient
    private let permits: AsyncPermits

    init(configuration: BridgeConfiguration, controller: HomeController, client: UpstreamClient, logger: Logger) {
        self.configuration = configuration
        self.controller = controller
        self.client = client
        self.logger = logger
        permits = AsyncPermits(count: configuration.source.concurrency)
    }

    /// The upstream takes light commands when `source.lights_command` says how.
    var lightSwitch: (any LightSwitch)? { configuration.source.lightsCommand.path == nil ? nil : client }

    /// Devices read the bound sensors; the upstream's values for them are not taken.
    private func isBound(_ sensor: SensorKind, in room: Room) -> Bool { room.bindings[sensor] != nil }

    /// Polled rooms start with their lights off until the upstream or the database says otherwise.
    func initialReadings() -> [Reading] {
        configuration.users.flatMap { user in
            user.rooms.filter { $0.unboundSensors.contains(.lights) }.map {
                Reading(user: user.id, room: $0.id, sensor: .lights, value: .binary(false))
            }
        }
    }

    /// Polls until cancelled.
    func run() async {
        let rooms = configuration.users.flatMap { user in user.rooms.map { (user, $0) } }
        let source = configuration.source
        logger.info("polling the upstream", ["base_url": source.baseURL ?? "", "rooms": String(rooms.count),
                                             "interval": String(source.interval)])
        if source.lightsCommand.path == nil {
            logger.info("source.lights_command is not set: the bridge keeps each light's state itself and "
                + "overlays it on the upstream's values")
        }
        let start = Monotonic.now
        await withDiscardingTaskGroup { group in
            for (index, (user, room)) in rooms.enumerated() {
                // Spread the rooms across the interval instead of polling them all at once.
                let offset = source.interval * Double(index) / Double(max(rooms.count, 1))
                group.addTask { await self.pollForever(user: user, room: room, firstPoll: start + offset) }
            }
        }
        permits.cancelAll()
    }

    private func pollForever(user: User, room: Room, firstPoll: Double) async {
        let source = configuration.source
        var schedule = PollSchedule(interval: source.interval, maxBackoff: source.maxBackoff,
                                    failuresBeforeOffline: source.failuresBeforeOffline, firstPoll: firstPoll)
        while !Task.isCancelled {
            let wait = schedule.nextPoll - Monotonic.now
            if wait > 0 {
                do { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) } catch { return }
            }
            // Another instance owns the user now (docs/scaling.md, "Leases"): asked again next interval.
            guard controller.ownership.owns(user.id) else {
                do { try await Task.sleep(for: .milliseconds(Int(max(source.interval, 1) * 1000))) } catch { return }
                continue
            }
            guard await permits.acquire() else { return }
            let started = Monotonic.now
            let outcome = await client.room(user: user.id, name: room.name)
            permits.release()
            switch outcome.flatMap({ body in SeedRoomParser.parse(body).mapError { UpstreamFailure(problem: $0.description, body: body) } }) {
            case .success(let readings):
                let change = schedule.succeeded(start: started)
                if change.worthLogging { logger.info("upstream room answers again", ["user": user.id, "room": room.id]) }
                if change.availabilityChanged { controller.setAvailability(RoomKey(user: user.id, room: room.id), online: true) }
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
                    controller.setAvailability(RoomKey(user: user.id, room: room.id), online: false)
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
