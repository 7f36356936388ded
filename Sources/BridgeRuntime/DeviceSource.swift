import BridgeCore
import BridgeMQTT
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// Real devices (README, "Connect your devices"): every bound sensor of the users this instance
/// owns reads its device's MQTT messages (or polls its HTTP endpoint), and bound lights are
/// switched on the device and published only when it confirms. Rooms with devices say on their
/// availability topic whether every device is online and no sensor is stale.
///
/// Devices on the bridge's own broker are subscribed through the bridge's router; with
/// `devices.mqtt.url` the source has a connection of its own, reconnecting like the bridge's.
final class DeviceSource: BridgeFeature, LightSwitch {
    let name = "devices"

    typealias Entry = DeviceBindings.Entry
    typealias SensorKey = DeviceBindings.SensorKey

    struct State {
        /// Availability topic → what the device last said (absent: nothing yet, taken as online).
        var deviceOnline: [String: Bool] = [:]
        var stale: Set<SensorKey> = []
        var lastSeen: [SensorKey: Double] = [:]
        var problem: [SensorKey: String] = [:]
        var errors: [SensorKey: Int] = [:]
        var roomOnline: [RoomKey: Bool] = [:]
    }

    /// The current bindings; replaced whole when rooms change (`rebind`).
    let bindings: Mutex<DeviceBindings>
    /// What `bindings` claim of the unbound devices heard (DeviceSource+Unbound.swift), replaced with them.
    let claims: Mutex<DeviceClaims>
    /// Who subscribes device topics on the bridge's own broker when the bindings change.
    private let router: MessageRouter?
    /// Tells the HTTP pollers that the bindings changed.
    private let rebound = CoalescedSignal()
    /// Tells the devices' own connection (`devices.mqtt.url`) that the bindings changed: it
    /// connects once a sensor is bound.
    private let boundNow = CoalescedSignal()
    let zigbeeBase: String
    /// With an admin configured: the presets' filters heard for unbound devices (DeviceSource+Unbound.swift).
    let discovery: [String]
    let unbound = Mutex(UnboundDevices())

    private let controller: HomeController
    private let logger: Logger
    private let broker: any BrokerLink
    /// The source's own connection, with `devices.mqtt.url`.
    private let ownBroker: MQTTClient?
    private let address: String
    private let commandTimeout: Double
    private let defaultInterval: Double
    private let source: BridgeConfiguration.Source
    let state = Mutex(State())
    private let confirmations = AsyncAnswers<RoomKey, Bool>()
    /// Device messages not yet applied: taken off the MQTT event loop at once and applied in
    /// `run()`, which waits for the broker between batches, so a device flooding messages costs
    /// bounded memory and the bridge's own publishing keeps pace (`DeviceInbox`).
    private let inbox = DeviceInbox()
    private let arrived = CoalescedSignal()
    private let started = Monotonic.now
    private let http: URLSession

    /// - Parameters:
    ///   - configuration: the users this instance may act for (their admins hear unbound devices).
    ///   - bound: the users whose bound sensors are read from the start (those it owns now; by
    ///     lease, nobody before the first round), `configuration`'s when nil.
    ///   - bridgeBroker: the bridge's connection, used when `devices.mqtt.url` is not set.
    init(configuration: BridgeConfiguration, bound: [User]? = nil, controller: HomeController,
         bridgeBroker: any BrokerLink, bridgeBrokerAddress: String, router: MessageRouter? = nil, logger: Logger) throws {
        self.router = router
        self.controller = controller
        self.logger = logger
        commandTimeout = configuration.devices.commandTimeout
        defaultInterval = max(configuration.source.interval, 1)
        source = configuration.source
        zigbeeBase = configuration.devices.zigbeeBaseTopic
        let initial = DeviceBindings(users: bound ?? configuration.users, zigbeeBase: configuration.devices.zigbeeBaseTopic)
        bindings = Mutex(initial)
        claims = Mutex(DeviceClaims(initial, zigbeeBase: configuration.devices.zigbeeBaseTopic))
        discovery = configuration.users.contains(where: \.isAdmin) ? UnboundDevices.filters(zigbeeBase: zigbeeBase) : []
        let session = URLSessionConfiguration.ephemeral
        session.requestCachePolicy = .reloadIgnoringLocalCacheData
        session.httpMaximumConnectionsPerHost = 2
        http = URLSession(configuration: session)
        if let url = configuration.devices.mqttURL {
            var devicesConfiguration = configuration
            devicesConfiguration.mqtt.url = url
            devicesConfiguration.mqtt.username = configuration.devices.mqttUsername
            devicesConfiguration.mqtt.password = configuration.devices.mqttPassword
            devicesConfiguration.mqtt.passwordFile = nil
            devicesConfiguration.mqtt.tlsCA = nil
            var mqtt = try Bridge.mqttConfiguration(devicesConfiguration, broker: url, logger: logger)
            mqtt.clientID = configuration.clientID + "-devices"
            mqtt.will = nil
            mqtt.cleanSession = true
            let client = try MQTTClient(configuration: mqtt)
            ownBroker = client
            broker = client
            address = url.description
        } else {
            ownBroker = nil
            broker = bridgeBroker
            address = bridgeBrokerAddress
        }
    }

    /// Whether any sensor of this instance is bound.
    var isEmpty: Bool { bindings.withLock { $0.rooms.isEmpty } }

    /// Every topic and filter the devices publish on.
    var deviceFilters: [String] { bindings.withLock { $0.filters } }

    var subscriptions: [MQTTSubscription] {
        ownBroker == nil ? subscribedFilters.map { MQTTSubscription(filter: $0, qos: 1) } : []
    }

    /// Whether the light of `key` is bound to a device (which then switches it).
    func bindsLight(_ key: RoomKey) -> Bool { bindings.withLock { $0.lights[key] != nil } }

    /// The rooms changed while running (README, "Managing the home"): reads `users`' bound sensors
    /// from now on, subscribing the topics that came and unsubscribing those that went; the unbound
    /// devices' filters stay, and a bound topic they cover is not subscribed of its own.
    func rebind(users: [User]) {
        let new = DeviceBindings(users: users, zigbeeBase: zigbeeBase)
        let old = bindings.withLock { bindings -> DeviceBindings in
            defer { bindings = new }
            return bindings
        }
        let (subscribe, unsubscribe) = Self.resubscription(from: old.filters, to: new.filters, discovery: discovery)
        for filter in subscribe {
            do {
                if let ownBroker { try ownBroker.subscribe(filter, qos: 1) } else { try router?.subscribe(filter, qos: 1, for: self) }
            } catch {
                logger.error("cannot subscribe to a device topic", ["topic": filter, "error": error.description])
            }
        }
        for filter in unsubscribe {
            if let ownBroker { try? ownBroker.unsubscribe(filter) } else { router?.unsubscribe(filter, for: self) }
        }
        let gone = Set(old.rooms.keys).subtracting(new.rooms.keys)
        state.withLock { state in
            for key in gone { state.roomOnline[key] = nil }
            state.stale = state.stale.filter { new.rooms[$0.room]?.sensors.contains($0) == true }
        }
        let claimed = DeviceClaims(new, zigbeeBase: zigbeeBase)
        claims.withLock { $0 = claimed }
        forgetClaimedDevices()
        rebound.request()
        boundNow.request()
        logger.info("devices rebound", ["rooms": String(new.rooms.count), "topics": String(new.filters.count),
                                        "subscribed": String(subscribe.count), "unsubscribed": String(unsubscribe.count)])
    }

    // MARK: Messages

    /// A device message, on the MQTT event loop: queued for `run()` (never blocks).
    func handle(_ message: MQTTMessage) {
        // An empty retained payload is a cleared topic, not a reading.
        guard !message.payload.isEmpty else { return }
        let dropped = inbox.put(message)
        if dropped == 1 || dropped % 10_000 == 0 {
            logger.warning("a device sends faster than the bridge applies; its oldest waiting messages are dropped",
                           ["topic": message.topic, "dropped_total": String(dropped)])
        }
        arrived.request()
    }

    /// Applies what arrived, after the broker has taken what the bridge published before.
    private func drain() async {
        for await _ in arrived.requests {
            while !Task.isCancelled {
                await broker.waitForBacklog(below: StatePublisher.backlogLimit)
                let batch = inbox.take(max: 1_000)
                if batch.isEmpty { break }
                for message in batch { apply(message) }
            }
        }
    }

    /// Messages a full inbox dropped so far (for `/metrics`).
    var droppedMessages: Int { inbox.dropped }

    private func apply(_ message: MQTTMessage) {
        let (entries, device) = bindings.withLock { bindings in
            (bindings.entries(for: message.topic, matches: MQTTTopicFilter.matches), bindings.availability[message.topic])
        }
        var readings: [Reading] = []
        var claimed = device != nil
        for entry in entries {
            switch DevicePayload.decode(message.payload, extractor: entry.extractor, sensor: entry.sensor,
                                        bound: entry.bound) {
            case .value(let value):
                readings.append(Reading(user: entry.key.user, room: entry.key.room, sensor: entry.sensor, value: value))
                seen(entry)
                claimed = true
            case .notForThisSensor:
                continue
            case .problem(let problem):
                failed(entry, problem, topic: message.topic)
                claimed = true
            }
        }
        if !readings.isEmpty { apply(readings) }
        if !claimed { noteUnbound(message) }
        if let (device, keys) = device {
            guard let online = device.isOnline(message.payload) else {
                logger.warning("ignored a device availability that says neither online nor offline",
                               ["topic": message.topic, "payload": String(message.text.prefix(40))])
                return
            }
            let changed = state.withLock { state -> Bool in
                defer { state.deviceOnline[message.topic] = online }
                return state.deviceOnline[message.topic] != online
            }
            if changed {
                logger.info(online ? "device online" : "device offline", ["topic": message.topic])
                for key in keys { updateRoom(key) }
            }
        }
    }

    private func apply(_ readings: [Reading]) {
        controller.record(readings)
        for reading in readings where reading.sensor == .lights {
            if case .binary(let on) = reading.value { confirmations.deliver(on, for: RoomKey(user: reading.user, room: reading.room)) }
        }
    }

    private func seen(_ entry: Entry) {
        let key = entry.sensorKey
        let (recovered, wasStale) = state.withLock { state -> (String?, Bool) in
            state.lastSeen[key] = Monotonic.now
            let wasStale = state.stale.remove(key) != nil
            return (state.problem.removeValue(forKey: key), wasStale)
        }
        if recovered != nil {
            logger.info("device readings are readable again", ["user": key.room.user, "room": key.room.room,
                                                               "sensor": key.sensor])
        }
        if wasStale {
            logger.info("sensor reports again", ["user": key.room.user, "room": key.room.room, "sensor": key.sensor])
            updateRoom(key.room)
        }
    }

    /// One log line per sensor per change of problem; every failure counted for `/metrics`.
    private func failed(_ entry: Entry, _ problem: DevicePayloadProblem, topic: String) {
        let key = entry.sensorKey
        let isNew = state.withLock { state -> Bool in
            state.errors[key, default: 0] += 1
            defer { state.problem[key] = problem.code }
            return state.problem[key] != problem.code
        }
        if isNew {
            logger.warning("ignored a device payload that gives no value; keeping the last good one",
                           ["user": key.room.user, "room": key.room.room, "sensor": key.sensor, "topic": topic,
                            "problem": problem.description])
        }
    }

    /// Publishes the room's availability when it changed: online while every device is and no
    /// sensor is stale.
    private func updateRoom(_ key: RoomKey) {
        guard let room = bindings.withLock({ $0.rooms[key] }) else { return }
        let changed = state.withLock { state -> Bool? in
            let online = room.devices.allSatisfy { state.deviceOnline[$0] ?? true }
                && room.sensors.allSatisfy { !state.stale.contains($0) }
            guard state.roomOnline[key] != online else { return nil }
            state.roomOnline[key] = online
            return online
        }
        if let online = changed { controller.setAvailability(key, online: online) }
    }

    // MARK: Running

    func run() async {
        let (rooms, http) = bindings.withLock { ($0.rooms.count, $0.httpSensors.count) }
        if rooms > 0 || !discovery.isEmpty {
            logger.info("reading devices", ["rooms": String(rooms), "topics": String(subscribedFilters.count),
                                            "http": String(http), "broker": address])
        }
        await withDiscardingTaskGroup { group in
            if let ownBroker {
                group.addTask { await self.serve(ownBroker) }
            }
            group.addTask { await self.watchFreshness() }
            group.addTask { await self.drain() }
            group.addTask { await self.pollHTTPDevices() }
        }
    }

    /// Polls every HTTP-bound sensor; when the bindings change, the pollers start again on the new ones.
    private func pollHTTPDevices() async {
        while !Task.isCancelled {
            let sensors = bindings.withLock { $0.httpSensors }
            await withTaskGroup(of: Void.self) { group in
                for (entry, binding) in sensors {
                    group.addTask { await self.poll(entry, binding) }
                }
                group.addTask { for await _ in self.rebound.requests { return } }
                _ = await group.next()
                group.cancelAll()
            }
        }
    }

    func shutdown() async {
        ownBroker?.stop()
    }

    /// The devices' own broker: subscribed to every device topic, its messages handled here.
    private func serve(_ client: MQTTClient) async {
        // Nothing to read yet (rooms may get devices while running): no connection yet either.
        if isEmpty && discovery.isEmpty {
            for await _ in boundNow.requests where !isEmpty { break }
            if Task.isCancelled { return }
        }
        for filter in subscribedFilters {
            do { try client.subscribe(filter, qos: 1) } catch {
                logger.error("cannot subscribe to a device topic", ["topic": filter, "error": error.description])
            }
        }
        do { try client.start() } catch {
            logger.error("cannot start the devices' broker connection", ["error": error.description])
            return
        }
        var wasConnected = false
        for await event in client.events {
            Bridge.log(event, broker: client, address: address, wasConnected: wasConnected, logger: logger)
            switch event {
            case .connected: wasConnected = true
            case .refused, .disconnected: wasConnected = false
            case .message(let message): handle(message)
            }
        }
    }

    /// Marks sensors stale when nothing came for their `expire_after` (counted from start for one
    /// never heard from), every second.
    private func watchFreshness() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(1)) } catch { return }
            let now = Monotonic.now
            let expiring = bindings.withLock { $0.expiring }
            if expiring.isEmpty { continue }
            let turnedStale = state.withLock { state -> [SensorKey] in
                expiring.filter { key, seconds in
                    now - (state.lastSeen[key] ?? started) > seconds && state.stale.insert(key).inserted
                }.map(\.key)
            }
            for key in turnedStale {
                logger.warning("sensor is stale: nothing from its device within expire_after",
                               ["user": key.room.user, "room": key.room.room, "sensor": key.sensor])
                updateRoom(key.room)
            }
        }
    }

    // MARK: HTTP devices

    /// Polls one HTTP-bound sensor every `interval`, backing off on failures like a REST room.
    private func poll(_ entry: Entry, _ binding: HTTPBinding) async {
        var schedule = PollSchedule(interval: binding.interval ?? defaultInterval, maxBackoff: source.maxBackoff,
                                    failuresBeforeOffline: source.failuresBeforeOffline, firstPoll: Monotonic.now)
        while !Task.isCancelled {
            let wait = schedule.nextPoll - Monotonic.now
            if wait > 0 {
                do { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) } catch { return }
            }
            let started = Monotonic.now
            switch await fetch(entry, binding) {
            case .success(let value):
                let change = schedule.succeeded(start: started)
                apply([Reading(user: entry.key.user, room: entry.key.room, sensor: entry.sensor, value: value)])
                seen(entry)
                if change.availabilityChanged { setHTTPDevice(entry, online: true) }
            case .failure(let failure):
                let problem = failure.problem
                let change = schedule.failed(start: started, problem: problem)
                if change.worthLogging {
                    logger.warning("device poll failed", ["user": entry.key.user, "room": entry.key.room,
                                                          "sensor": entry.sensor.id, "problem": problem])
                }
                if change.availabilityChanged { setHTTPDevice(entry, online: false) }
            }
        }
    }

    /// An HTTP device went offline (repeated failed polls) or came back: the room's availability
    /// follows the same rule as for every other device of the room.
    private func setHTTPDevice(_ entry: Entry, online: Bool) {
        state.withLock { $0.deviceOnline[DeviceBindings.httpDevice(entry.sensorKey)] = online }
        updateRoom(entry.key)
    }

    private func fetch(_ entry: Entry, _ binding: HTTPBinding) async -> Result<SensorValue, DeviceFailure> {
        guard let url = URL(string: binding.url) else { return .failure(DeviceFailure("cannot build a URL from \(binding.url)")) }
        var request = URLRequest(url: url, timeoutInterval: binding.timeout)
        for (name, value) in binding.headers { request.setValue(value, forHTTPHeaderField: name) }
        let body: [UInt8]
        switch await send(request) {
        case .success(let bytes): body = bytes
        case .failure(let failure): return .failure(failure)
        }
        switch DevicePayload.decode(body, extractor: entry.extractor, sensor: entry.sensor, bound: entry.bound) {
        case .value(let value): return .success(value)
        case .notForThisSensor: return .failure(DeviceFailure("no value"))
        case .problem(let problem):
            failed(entry, problem, topic: binding.url)
            return .failure(DeviceFailure(problem.description))
        }
    }

    private func send(_ request: URLRequest) async -> Result<[UInt8], DeviceFailure> {
        do {
            let (data, response) = try await http.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            guard (200..<300).contains(status) else { return .failure(DeviceFailure("status \(status)")) }
            return .success(Array(data.prefix(DevicePayload.maxBytes + 1)))
        } catch let error as URLError where error.code == .timedOut {
            return .failure(DeviceFailure("timed out"))
        } catch {
            return .failure(DeviceFailure("connection failed: \(error.localizedDescription)"))
        }
    }

    // MARK: Lights

    /// Sends the command to the light's device and waits for the device to report the new state
    /// (`devices.command_timeout`); an optimistic device is taken at its word.
    func switchLight(_ target: CommandTarget, on: Bool) async -> Result<SwitchOutcome, CommandRejection> {
        guard let light = bindings.withLock({ $0.lights[target.key] }) else { return .success(.accepted) }
        if let binding = light.http, let command = binding.command {
            return await switchOverHTTP(target, on: on, binding: binding, command: command)
        }
        guard let topics = light.topics, let command = topics.command else { return .success(.accepted) }
        let payload = on ? command.on : command.off
        let publish: @Sendable () -> Void = { [broker, logger] in
            do {
                _ = try broker.publish(topic: command.topic, payload: Array(payload.utf8), qos: 1, retain: false)
            } catch {
                logger.warning("cannot send a command to a device", ["topic": command.topic, "error": "\(error)"])
            }
        }
        if topics.optimistic {
            publish()
            return .success(.accepted)
        }
        let confirmed = await confirmations.wait(for: target.key, timeout: commandTimeout, accepts: { $0 == on },
                                                 send: publish)
        return confirmed == nil ? .failure(.deviceTimeout(seconds: commandTimeout)) : .success(.applied)
    }

    /// An HTTP light: the command request, then polls until one shows the new state.
    private func switchOverHTTP(_ target: CommandTarget, on: Bool, binding: HTTPBinding,
                                command: HTTPBinding.Command) async -> Result<SwitchOutcome, CommandRejection> {
        guard let url = URL(string: command.url) else {
            return .failure(.upstream(status: 0, detail: "cannot build a URL from \(command.url)"))
        }
        var request = URLRequest(url: url, timeoutInterval: binding.timeout)
        request.httpMethod = command.method
        for (name, value) in binding.headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body = command.body {
            request.httpBody = Data(body.replacing("{state}", with: on ? "ON" : "OFF").utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if case .failure(let failure) = await send(request) {
            return .failure(.upstream(status: 0, detail: failure.problem))
        }
        guard let entry = bindings.withLock({ $0.httpSensors }).first(where: { $0.entry.key == target.key && $0.entry.sensor == .lights })?.entry
        else { return .success(.accepted) }
        let deadline = Monotonic.now + commandTimeout
        while Monotonic.now < deadline, !Task.isCancelled {
            if case .success(let value) = await fetch(entry, binding) {
                apply([Reading(user: target.user.id, room: target.room.id, sensor: .lights, value: value)])
                seen(entry)
                if value == .binary(on) { return .success(.applied) }
            }
            try? await Task.sleep(for: .milliseconds(Int(min(0.5, commandTimeout / 4) * 1000)))
        }
        return .failure(.deviceTimeout(seconds: commandTimeout))
    }
}
