import BridgeCore
import BridgeCrypto
import BridgeHTTP
import BridgeMQTT
import Foundation

/// The running bridge: simulated readings out to MQTT, light commands in, the same state served
/// over HTTP. `run()` works until its task is cancelled, then shuts down cleanly.
public final class Bridge: Sendable {
    /// The version reported by `--version`, `bridge/info` and Home Assistant.
    public static let version = "0.1.0"

    private let configuration: BridgeConfiguration
    private let logger: Logger
    private let topics: Topics
    private let store: HomeStore
    private let mqtt: MQTTClient
    private let http: HTTPServer
    private let brokerAddress: String
    private let startedAt = Date()

    /// Sets the bridge up without connecting or listening yet.
    /// - Parameters:
    ///   - broker: where to connect; the embedded broker's address when `mqtt.url` is not set.
    public init(configuration: BridgeConfiguration, broker: BrokerURL, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        topics = Topics(base: configuration.mqtt.baseTopic)
        store = HomeStore(home: Home(users: configuration.users), refresh: configuration.publish.refresh)
        brokerAddress = broker.description
        mqtt = try MQTTClient(configuration: Bridge.mqttConfiguration(configuration, broker: broker))
        let routes = HTTPRoutes(legacyRoutes: configuration.http.legacyRoutes) { password, hash in
            PasswordHasher.verify(password: password, userHash: hash)
        }
        let store = store
        let mqtt = mqtt
        let brokerAddress = brokerAddress
        let startedAt = startedAt
        http = HTTPServer(configuration: Bridge.httpConfiguration(configuration.http)) { request in
            routes.respond(
                to: request,
                home: { store.home },
                health: {
                    HTTPRoutes.Health(
                        mqttConnected: mqtt.isConnected,
                        mqttProblem: mqtt.lastProblem,
                        broker: brokerAddress,
                        uptimeSeconds: Int(Date().timeIntervalSince(startedAt))
                    )
                }
            )
        }
    }

    /// The port the HTTP server listens on (useful when `http.port` is 0).
    public var httpPort: Int { http.port }

    static func mqttConfiguration(_ configuration: BridgeConfiguration, broker: BrokerURL) throws -> MQTTConfiguration {
        let mqtt = configuration.mqtt
        var password = mqtt.password
        if let file = mqtt.passwordFile {
            do {
                password = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .newlines)
            } catch {
                throw RuntimeError("cannot read mqtt.password_file \(file): \(error.localizedDescription)")
            }
        }
        let tls: MQTTConfiguration.TLS? = broker.tls || mqtt.tlsCA != nil
            ? MQTTConfiguration.TLS(caFile: mqtt.tlsCA, certFile: mqtt.tlsCert, keyFile: mqtt.tlsKey,
                                    verifyHostname: mqtt.tlsVerify)
            : nil
        return MQTTConfiguration(
            host: broker.host,
            port: broker.port,
            clientID: mqtt.effectiveClientID,
            username: mqtt.username,
            password: password,
            keepalive: mqtt.keepalive,
            will: .init(topic: Topics(base: mqtt.baseTopic).bridgeState, payload: Array("offline".utf8), qos: 1,
                        retain: true),
            tls: tls,
            reconnectMin: Int(mqtt.reconnectMin.rounded(.up)),
            reconnectMax: Int(mqtt.reconnectMax.rounded(.up))
        )
    }

    static func httpConfiguration(_ http: BridgeConfiguration.HTTP) -> HTTPServerConfiguration {
        HTTPServerConfiguration(
            bindAddress: http.bind,
            port: http.port,
            maxConnections: http.maxConnections,
            maxConnectionsPerAddress: http.maxConnectionsPerAddress,
            connectionTimeoutSeconds: Int(http.connectionTimeout.rounded(.up)),
            maxHeaderBytes: http.maxHeaderBytes,
            maxBodyBytes: http.maxBodyBytes,
            threadPoolSize: http.threads
        )
    }

    // MARK: Running

    /// Serves HTTP, connects to the broker and runs the source until the task is cancelled; then
    /// publishes `offline`, disconnects and stops serving.
    public func run() async throws {
        try http.start()
        logger.info("HTTP listening", ["bind": configuration.http.bind, "port": String(http.port)])
        if configuration.http.legacyRoutes {
            logger.warning("legacy seed routes are on: /login/:username/:password carries passwords in URLs; "
                + "turn http.legacy_routes off unless an old app needs them")
        }
        let simulator = Simulator(users: configuration.users, seed: seed())
        record(simulator.initialReadings(), publish: false)
        try mqtt.subscribe(topics.commandFilter, qos: configuration.mqtt.qos)
        try mqtt.start()
        logger.info("connecting to broker", ["broker": brokerAddress, "client_id": configuration.mqtt.effectiveClientID])

        await withDiscardingTaskGroup { group in
            group.addTask { await self.handleEvents() }
            group.addTask { [simulator] in
                var simulator = simulator
                let interval = self.configuration.source.interval
                while !Task.isCancelled {
                    if interval > 0 {
                        do { try await Task.sleep(for: .milliseconds(Int(interval * 1000))) } catch { break }
                    } else {
                        await Task.yield()
                    }
                    self.record(simulator.step(), publish: true)
                }
            }
        }
        await shutdown()
    }

    private func seed() -> UInt64 {
        if let seed = configuration.source.seed { return seed }
        let seed = UInt64.random(in: 0...UInt64.max)
        logger.info("simulating with a random seed; set source.seed to repeat this run", ["seed": String(seed)])
        return seed
    }

    private func shutdown() async {
        logger.info("shutting down")
        do {
            try mqtt.publish(topic: topics.bridgeState, text: "offline", qos: 1, retain: true)
            if !(await mqtt.waitForPublished(timeout: 2)) {
                logger.warning("broker did not acknowledge everything before shutdown")
            }
        } catch {
            logger.warning("could not publish offline state", ["error": error.description])
        }
        mqtt.stop()
        http.stop()
    }

    private func handleEvents() async {
        var wasConnected = false
        for await event in mqtt.events {
            switch event {
            case .connected:
                logger.info("connected to broker", ["broker": brokerAddress])
                wasConnected = true
                publishEverything()
            case .refused(let reason):
                logger.error("broker refused: \(reason)", ["broker": brokerAddress])
            case .disconnected(let unexpected, let reason):
                if unexpected, wasConnected {
                    logger.warning("lost connection to broker; reconnecting", ["broker": brokerAddress, "reason": reason])
                } else if unexpected {
                    logger.warning("cannot reach broker; retrying", ["broker": brokerAddress, "reason": reason])
                }
                wasConnected = false
            case .message(let message):
                handleCommand(message)
            }
        }
    }

    // MARK: Publishing

    /// Publishes state, info and every current value, retained: after every (re)connect, so a
    /// broker that restarted without persistence has the whole home again.
    private func publishEverything() {
        let info = BridgeInfo(version: Bridge.version, sourceKind: configuration.source.kind.rawValue,
                              users: configuration.users, startedAt: startedAt)
        publish(topics.bridgeState, "online")
        publish(topics.bridgeInfo, info.json.serialized)
        let messages: [(String, String)] = store.withLock { state in
            let now = store.now
            var messages: [(String, String)] = []
            for reading in state.home.allReadings {
                messages.append((topics.sensor(user: reading.user, room: reading.room, sensor: reading.sensor),
                                 reading.value.mqttPayload))
            }
            for user in state.home.users {
                for room in user.rooms {
                    messages.append((topics.room(user: user.id, room: room.id),
                                     SeedShapes.room(room, user: user.id, in: state.home).serialized))
                }
            }
            for (topic, payload) in messages { state.tracker.markPublished(topic: topic, payload: payload, now: now) }
            return messages
        }
        for (topic, payload) in messages { publish(topic, payload) }
        logger.info("published retained state", ["messages": String(messages.count + 2)])
    }

    /// Stores readings and publishes those whose payload changed (or whose refresh is due), then
    /// the JSON of each room that had a reading published, and a `gas` event when gas comes or goes.
    private func record(_ readings: [Reading], publish shouldPublish: Bool) {
        let time = Date()
        let (messages, events) = store.withLock { state -> ([(String, String)], [(String, String)]) in
            let now = store.now
            var messages: [(String, String)] = []
            var events: [(String, String)] = []
            var touchedRooms: [RoomKey] = []
            for reading in readings {
                let key = RoomKey(user: reading.user, room: reading.room)
                let changed = state.home.record(reading, at: time)
                guard shouldPublish else { continue }
                if reading.sensor == .gas, changed, case .binary(let detected) = reading.value {
                    events.append((topics.events(user: reading.user),
                                   BridgeEvent.gas(room: reading.room, detected: detected, at: time).serialized))
                }
                let topic = topics.sensor(user: reading.user, room: reading.room, sensor: reading.sensor)
                let payload = reading.value.mqttPayload
                if state.tracker.shouldPublish(topic: topic, payload: payload, now: now) {
                    messages.append((topic, payload))
                    if touchedRooms.last != key, !touchedRooms.contains(key) { touchedRooms.append(key) }
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
            return (messages, events)
        }
        for (topic, payload) in messages { publish(topic, payload) }
        for (topic, payload) in events { publish(topic, payload, retain: false) }
    }

    private func publish(_ topic: String, _ payload: String, retain: Bool = true) {
        do {
            try mqtt.publish(topic: topic, text: payload, qos: configuration.mqtt.qos, retain: retain)
        } catch {
            // QoS 0 while disconnected: the value goes out again on reconnect anyway.
            logger.debug("publish failed", ["topic": topic, "error": error.description])
        }
    }

    // MARK: Commands

    private func handleCommand(_ message: MQTTMessage) {
        guard let target = topics.parseCommandTopic(message.topic) else {
            logger.warning("ignored message on an unexpected topic", ["topic": message.topic])
            return
        }
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
        _ = execute(command, user: target.user, room: target.room, source: "mqtt", topic: message.topic)
    }

    /// Applies a light command and publishes the result: the one path every command takes,
    /// whatever it came through.
    @discardableResult
    public func execute(_ command: LightCommand, user: String, room: String, source: String, topic: String? = nil)
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
            logger.info("light switched", ["user": reading.user, "room": reading.room, "command": command.rawValue,
                                           "state": reading.value.mqttPayload, "source": source])
            return .success(reading)
        case .failure(let rejection):
            reject(rejection, topic: topic ?? topics.lightsSet(user: user, room: room), user: user, room: room,
                   source: source)
            return .failure(rejection)
        }
    }

    private func reject(_ rejection: CommandRejection, topic: String, user: String, room: String, source: String) {
        logger.warning("command rejected", ["topic": topic, "reason": rejection.code, "detail": rejection.description])
        guard store.home.user(id: user) != nil else { return }
        let event = BridgeEvent.commandRejected(topic: topic, room: room, rejection: rejection, source: source, at: Date())
        publish(topics.events(user: user), event.serialized, retain: false)
    }
}

/// A start-up problem outside any one library: names what went wrong.
public struct RuntimeError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
