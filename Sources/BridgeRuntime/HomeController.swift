import BridgeCore
import BridgeMQTT
import BridgeStorage
import Foundation
import Synchronization

/// The bridge's state and the one path every change takes: readings and commands are applied to
/// the home, published over MQTT, and seen by HTTP at once.
final class HomeController: Sendable {
    let configuration: BridgeConfiguration
    let logger: Logger
    let topics: Topics
    let store: HomeStore
    private let mqtt: MQTTClient
    private let startedAt: Date
    /// Where every published reading is recorded.
    private let history: HistoryRecorder
    /// Live HTTP event streams.
    let events: EventHub
    /// Where light commands are forwarded first, when a REST upstream takes them.
    private let upstream: UpstreamClient?
    /// Home Assistant discovery, when `homeassistant.discovery` is on.
    let discovery: HomeAssistantDiscovery?
    /// Which users this instance owns (all of them unless `cluster.instances` > 1).
    let membership: ClusterMembership
    /// Relayed light commands waiting for the owning instance's confirmation.
    let confirmations = AwaitedAnswers<RoomKey, Bool>()

    init(configuration: BridgeConfiguration, logger: Logger, mqtt: MQTTClient, history: HistoryRecorder,
         events: EventHub, upstream: UpstreamClient?, startedAt: Date) {
        self.upstream = upstream
        discovery = configuration.homeAssistant.discovery
            ? HomeAssistantDiscovery(prefix: configuration.homeAssistant.prefix,
                                     topics: Topics(base: configuration.mqtt.baseTopic), version: Bridge.version,
                                     sourceKind: configuration.source.kind.rawValue,
                                     clustered: configuration.cluster.instances > 1)
            : nil
        membership = configuration.cluster.membership
        self.configuration = configuration
        self.logger = logger
        self.mqtt = mqtt
        self.history = history
        self.events = events
        self.startedAt = startedAt
        topics = Topics(base: configuration.mqtt.baseTopic)
        store = HomeStore(home: Home(users: configuration.users), refresh: configuration.publish.refresh)
    }

    // MARK: Publishing

    /// How many messages may wait for the broker before a producer of many (a simulator tick, the
    /// retained state after a connect) waits for it: the back-pressure that keeps every reading
    /// while connected without holding a whole large home in memory at once.
    static let backlogLimit = 2_000

    /// The retained state being republished, if it still is.
    private let republishing = Mutex<Task<Void, Never>?>(nil)

    /// Starts `publishEverything()` without holding up the caller (which handles the broker's
    /// events), in place of one still running from an earlier connection.
    func republishEverything() {
        let task = Task { await self.publishEverything() }
        republishing.withLock { current in
            current?.cancel()
            current = task
        }
    }

    /// Publishes state, info and every current value, retained: after every (re)connect, so a
    /// broker that restarted without persistence has the whole home again. Room by room, waiting
    /// for the broker between rooms, so a large home never has all its Home Assistant configs
    /// and values built and queued at once.
    func publishEverything() async {
        let info = BridgeInfo(version: Bridge.version, sourceKind: configuration.source.kind.rawValue,
                              users: configuration.users, startedAt: startedAt)
        if membership.isClustered { publish(topics.instanceState(membership.index), "online") }
        publish(topics.bridgeState, "online")
        publish(topics.bridgeInfo, info.json.serialized)
        if let discovery { publish(discovery.bridgeConfig.topic, discovery.bridgeConfig.payload.serialized) }
        var published = discovery == nil ? 2 : 3
        for user in configuration.users where membership.owns(user.id) {
            for room in user.rooms {
                await mqtt.waitForBacklog(below: Self.backlogLimit)
                if Task.isCancelled { return }
                published += publishRetained(user: user, room: room)
            }
        }
        logger.info("published retained state", ["messages": String(published)])
    }

    /// One room's retained messages: its Home Assistant configs first (so Home Assistant has each
    /// entity when its state arrives), its values and room JSON, and its availability when polled.
    private func publishRetained(user: User, room: Room) -> Int {
        var messages: [(String, String)] = []
        let key = RoomKey(user: user.id, room: room.id)
        store.withLock { state in
            if let discovery {
                messages = discovery.configs(user: user, room: room, home: state.home).map {
                    ($0.topic, $0.payload.serialized)
                }
            }
            let now = store.now
            let current = state.home.values(in: key)
            var values: [(String, String)] = state.home.sensors(of: room, user: user.id).compactMap { sensor in
                current[sensor].map { (topics.sensor(user: user.id, room: room.id, sensor: sensor), $0.mqttPayload) }
            }
            values.append((topics.room(user: user.id, room: room.id),
                           SeedShapes.room(room, user: user.id, in: state.home).serialized))
            for (topic, payload) in values { state.tracker.markPublished(topic: topic, payload: payload, now: now) }
            messages += values
            // Polled rooms (their upstream can fail) and a cluster's rooms (their instance can die).
            if configuration.source.kind == .rest || membership.isClustered {
                messages.append((topics.availability(user: user.id, room: room.id),
                                 state.offline.contains(key) ? "offline" : "online"))
            }
        }
        for (topic, payload) in messages { publish(topic, payload) }
        return messages.count
    }

    /// Cluster: another instance went offline without saying so for its rooms (it was killed or
    /// lost its connection), so its rooms are announced unavailable on its behalf.
    func announceRoomsOffline(ofInstance instance: Int) -> Int {
        var count = 0
        for user in configuration.users where membership.owner(of: user.id) == instance {
            for room in user.rooms {
                publish(topics.availability(user: user.id, room: room.id), "offline")
                count += 1
            }
        }
        return count
    }

    /// Stores readings and publishes those whose payload changed (or whose refresh is due), then
    /// the JSON of each room that had a reading published, and a `gas` event when gas comes or goes.
    func record(_ readings: [Reading], publish shouldPublish: Bool) {
        let time = Date()
        let (messages, events, rows) = store.withLock {
            state -> ([(String, String)], [(String, JSONValue)], [HistoryStore.Row]) in
            let now = store.now
            var messages: [(String, String)] = []
            var events: [(String, JSONValue)] = []
            var rows: [HistoryStore.Row] = []
            var touchedRooms: [RoomKey] = []
            var touched: Set<RoomKey> = []
            for reading in readings {
                let key = RoomKey(user: reading.user, room: reading.room)
                let changed = state.home.record(reading, at: time)
                guard shouldPublish else { continue }
                if reading.sensor == .gas, changed, case .binary(let detected) = reading.value {
                    events.append((reading.user, BridgeEvent.gas(room: reading.room, detected: detected, at: time)))
                }
                let topic = topics.sensor(user: reading.user, room: reading.room, sensor: reading.sensor)
                let payload = reading.value.mqttPayload
                if state.tracker.shouldPublish(topic: topic, payload: payload, now: now) {
                    messages.append((topic, payload))
                    rows.append(HistoryStore.Row(user: reading.user, room: reading.room, sensor: reading.sensor.id,
                                                 time: time, value: payload))
                    if touched.insert(key).inserted { touchedRooms.append(key) }
                }
            }
            for key in touchedRooms {
                guard let user = state.home.user(id: key.user), let room = user.rooms.first(where: { $0.id == key.room })
                else { continue }
                let topic = topics.room(user: key.user, room: key.room)
                let payload = SeedShapes.room(room, user: key.user, in: state.home).serialized
                if state.tracker.shouldPublish(topic: topic, payload: payload, now: now) {
                    messages.append((topic, payload))
                }
            }
            return (messages, events, rows)
        }
        for (topic, payload) in messages { publish(topic, payload) }
        for (user, event) in events { publishEvent(user: user, event) }
        history.add(rows)
        for row in rows { streamState(row) }
    }

    func publish(_ topic: String, _ payload: String, retain: Bool = true) {
        do {
            try mqtt.publish(topic: topic, text: payload, qos: configuration.mqtt.qos, retain: retain)
        } catch {
            // QoS 0 while disconnected: the value goes out again on reconnect anyway.
            logger.debug("publish failed", ["topic": topic, "error": error.description])
        }
    }

    // MARK: Commands

    func handleCommand(_ message: MQTTMessage) {
        guard let target = topics.parseCommandTopic(message.topic) else {
            logger.warning("ignored message on an unexpected topic", ["topic": message.topic])
            return
        }
        // Every instance receives every command; only the user's owner acts (or rejects).
        guard membership.owns(target.user) else { return }
        if message.retain {
            logger.warning("ignored a retained command: a stale retained /set message must never switch lights; "
                + "clear it with an empty retained publish", ["topic": message.topic])
            return
        }
        let command: LightCommand
        switch store.home.commandTarget(user: target.user, room: target.room, sensor: target.sensor)
            .flatMap({ _ in LightCommand.parse(message.payload) })
        {
        case .success(let parsed): command = parsed
        case .failure(let rejection):
            reject(rejection, topic: message.topic, user: target.user, room: target.room, source: "mqtt")
            return
        }
        // A QoS 1 message the broker sent again after a reconnect (same packet id) was applied on
        // the previous connection: ON/OFF are idempotent, a second TOGGLE would undo the first.
        if message.isRedelivery, command == .toggle {
            logger.info("ignored a redelivered TOGGLE (already applied)",
                        ["topic": message.topic, "packet_id": String(message.messageID)])
            return
        }
        self.command(command, user: target.user, room: target.room, source: "mqtt", topic: message.topic)
    }

    /// Applies a light command and publishes the result: the one path every command takes,
    /// whatever it came through.
    @discardableResult
    func execute(_ command: LightCommand, user: String, room: String, source: String, topic: String? = nil)
        -> Result<Reading, CommandRejection>
    {
        let time = Date()
        let outcome = store.withLock { state -> Result<(Reading, [(String, String)]), CommandRejection> in
            state.home.apply(command, user: user, room: room, at: time).map { reading in
                let now = store.now
                let sensorTopic = topics.sensor(user: reading.user, room: reading.room, sensor: .lights)
                var messages = [(sensorTopic, reading.value.mqttPayload)]
                if let owner = state.home.user(id: reading.user), let target = owner.room(named: reading.room) {
                    messages.append((topics.room(user: reading.user, room: reading.room),
                                     SeedShapes.room(target, user: reading.user, in: state.home).serialized))
                }
                for (topic, payload) in messages { state.tracker.markPublished(topic: topic, payload: payload, now: now) }
                return (reading, messages)
            }
        }
        switch outcome {
        case .success(let (reading, messages)):
            for (topic, payload) in messages { publish(topic, payload) }
            let row = HistoryStore.Row(user: reading.user, room: reading.room, sensor: SensorKind.lights.id, time: time,
                                       value: reading.value.mqttPayload)
            history.add([row])
            streamState(row)
            logger.info("light switched", ["user": reading.user, "room": reading.room, "command": command.rawValue,
                                           "state": reading.value.mqttPayload, "source": source])
            return .success(reading)
        case .failure(let rejection):
            reject(rejection, topic: topic ?? topics.lightsSet(user: user, room: room), user: user, room: room,
                   source: source)
            return .failure(rejection)
        }
    }

    /// Marks a polled room online or offline and publishes its retained availability.
    func setAvailability(user: String, room: String, online: Bool) {
        let key = RoomKey(user: user, room: room)
        store.withLock { state in
            if online { state.offline.remove(key) } else { state.offline.insert(key) }
        }
        publish(topics.availability(user: user, room: room), online ? "online" : "offline")
    }

    // MARK: Command entry points

    /// Runs a command from MQTT or an alarm. With a REST upstream that takes light commands, the
    /// command is forwarded first, without holding up the caller.
    func command(_ command: LightCommand, user: String, room: String, source: String, topic: String? = nil) {
        guard upstream != nil else {
            execute(command, user: user, room: room, source: source, topic: topic)
            return
        }
        Task { await forwardThenExecute(command, user: user, room: room, source: source, topic: topic) }
    }

    /// Runs a command from the HTTP API and waits for its outcome (on libmicrohttpd's thread, which
    /// may block; never called from async code).
    func commandAndWait(_ command: LightCommand, user: String, room: String, source: String)
        -> Result<Reading, CommandRejection>
    {
        guard membership.owns(user) else {
            return relay(command, user: user, room: room, source: source)
        }
        guard upstream != nil else { return execute(command, user: user, room: room, source: source) }
        let done = DispatchSemaphore(value: 0)
        let outcome = OutcomeBox()
        Task {
            outcome.value = await forwardThenExecute(command, user: user, room: room, source: source, topic: nil)
            done.signal()
        }
        done.wait()
        return outcome.value ?? .failure(.upstream(status: 0, detail: "no answer"))
    }

    /// Resolves the command against the current state, has the upstream switch the light, and only
    /// when it accepts, applies and publishes the new state.
    private func forwardThenExecute(_ command: LightCommand, user: String, room: String, source: String,
                                    topic: String?) async -> Result<Reading, CommandRejection> {
        let target = store.home.commandTarget(user: user, room: room)
        guard case .success(let (owner, found)) = target, let upstream else {
            return execute(command, user: user, room: room, source: source, topic: topic)
        }
        let current = store.home.value(of: .lights, in: RoomKey(user: owner.id, room: found.id)) == .binary(true)
        let on = command.applied(to: current)
        switch await upstream.forwardLights(user: owner.id, room: found, on: on) {
        case .success:
            return execute(on ? .on : .off, user: owner.id, room: found.id, source: source, topic: topic)
        case .failure(let rejection):
            reject(rejection, topic: topic ?? topics.lightsSet(user: owner.id, room: found.id), user: owner.id,
                   room: found.id, source: source)
            return .failure(rejection)
        }
    }

    /// Publishes a JSON event on the user's events topic (not retained) and to the user's HTTP
    /// event streams.
    func publishEvent(user: String, _ event: JSONValue) {
        publish(topics.events(user: user), event.serialized, retain: false)
        if case .object(let members) = event, case .string(let type)? = members.first(where: { $0.0 == "type" })?.1 {
            events.send(user: user, event: type, event)
        }
    }

    /// A published reading, as a `state` event on the user's HTTP event streams (built only when
    /// the user has one open).
    func streamState(_ row: HistoryStore.Row) {
        events.send(user: row.user, event: "state", JSONValue.object([
            ("type", .string("state")), ("room", .string(row.room)), ("sensor", .string(row.sensor)),
            ("value", .string(row.value)), ("at", .string(Timestamp.iso8601(row.time))),
        ]))
    }

    /// Puts back the last values recorded before a restart (lights above all: they change only by
    /// command, so without this a restart would switch every light off).
    func restore(_ rows: [HistoryStore.Row]) -> Int {
        store.withLock { state in
            var restored = 0
            for row in rows {
                let sensor = SensorKind.named(row.sensor)
                // Only rooms still configured; their sensors may include ones an upstream reported.
                guard state.home.user(id: row.user)?.rooms.contains(where: { $0.id == row.room }) == true else { continue }
                let value = SensorValue.parse(row.value, for: sensor)
                guard let value else { continue }
                state.home.record(Reading(user: row.user, room: row.room, sensor: sensor, value: value), at: row.time)
                restored += 1
            }
            return restored
        }
    }

    private func reject(_ rejection: CommandRejection, topic: String, user: String, room: String, source: String) {
        logger.warning("command rejected", ["topic": topic, "reason": rejection.code, "detail": rejection.description])
        guard store.home.user(id: user) != nil else { return }
        publishEvent(user: user, BridgeEvent.commandRejected(topic: topic, room: room, rejection: rejection, source: source,
                                                             at: Date()))
    }
}

/// Carries a command's outcome from the task that forwarded it to the thread waiting for it.
private final class OutcomeBox: @unchecked Sendable {
    // @unchecked: written once by the task before it signals, read once by the waiter after.
    var value: Result<Reading, CommandRejection>?
}
