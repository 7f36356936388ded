import BridgeCore
import BridgeMQTT
import Foundation

/// Switches a light somewhere else than in the bridge's own state (a REST upstream, a device),
/// which must accept before the bridge publishes the new state.
protocol LightSwitch: Sendable {
    func switchLight(_ target: CommandTarget, on: Bool) async -> Result<SwitchOutcome, CommandRejection>
}

/// What a `LightSwitch` did with a command it accepted.
enum SwitchOutcome: Sendable, Equatable {
    /// Done: the bridge now applies and publishes the new state.
    case accepted
    /// The device reported the new state itself, which the bridge has already applied.
    case applied
}

/// The command path (README, "MQTT"): MQTT `/set` messages, the API and alarm actions
/// all end in `perform`, which resolves the target once, asks the `LightSwitch` when one takes
/// the command, and switches the light through the home controller. In a cluster an API command
/// for another instance's user is relayed to its owner and confirmed by the owner's published state.
/// A group command (README, "Groups") decides one state for the whole group (`TOGGLE`: `OFF` when
/// every light of it is on, else `ON`) and sends each room that state as its own `ON`/`OFF` command.
final class CommandService: BridgeFeature, StateSubscriber {
    let name = "commands"

    /// Commands waiting for a `LightSwitch` at most; more are rejected, never queued without end.
    static let maxWaiting = 256

    private struct Job: Sendable {
        var command: LightCommand
        var target: CommandTarget
        var origin: CommandOrigin
        var done: Rendezvous<Result<Reading, CommandRejection>>?
    }

    private let controller: HomeController
    private let topics: Topics
    private let qos: Int
    private let logger: Logger
    /// Who switches a target's light, when not the bridge itself.
    private let lights: @Sendable (CommandTarget) -> (any LightSwitch)?
    private let switchTimeout: Double
    private let outbound: Outbound
    private let jobs = WorkQueue<Job>(capacity: CommandService.maxWaiting)
    /// Cluster: relayed commands waiting for the owning instance's confirmation.
    private let confirmations = AwaitedAnswers<RoomKey, Bool>()
    private let relayTimeout: Double
    /// Cluster: whether an instance is online as far as this one has seen (a relay to one known
    /// to be offline fails at once).
    private let instanceOnline: @Sendable (Int) -> Bool
    /// Homie's devices, whose `…/lights/set` topics are commands too (README, "Homie").
    private let homie: HomieDevices?
    /// The per-user rate limit and the summarised log of dropped and rejected commands.
    let gate: CommandGate

    /// - Parameters:
    ///   - lights: where a target's commands go before the state changes (its device, or a source
    ///     that takes them), nil when the bridge keeps the light itself.
    ///   - switchTimeout: how long an API request waits for `lights` at most.
    init(controller: HomeController, configuration: BridgeConfiguration, outbound: Outbound, logger: Logger,
         lights: @escaping @Sendable (CommandTarget) -> (any LightSwitch)?, switchTimeout: Double,
         instanceOnline: @escaping @Sendable (Int) -> Bool = { _ in true }, homie: HomieDevices? = nil) {
        self.homie = homie
        self.controller = controller
        self.outbound = outbound
        self.logger = logger
        self.lights = lights
        self.switchTimeout = switchTimeout
        self.instanceOnline = instanceOnline
        topics = Topics(base: configuration.mqtt.baseTopic)
        qos = configuration.mqtt.qos
        relayTimeout = configuration.cluster.commandTimeout
        gate = CommandGate(rate: configuration.commands.rate, burst: configuration.commands.burst, logger: logger)
    }

    /// The room filter also takes `<base>/<user>/groups/<group>/set`, so a group command arrives
    /// once; every light of a user has a filter of its own (one level shorter).
    var subscriptions: [MQTTSubscription] {
        [MQTTSubscription(filter: topics.commandFilter, qos: qos), MQTTSubscription(filter: topics.userLightsFilter, qos: qos)]
            + (homie.map { [MQTTSubscription(filter: $0.setFilter, qos: qos)] } ?? [])
    }

    private var ownership: Ownership { controller.ownership }

    // MARK: Entry points

    /// An MQTT `/set` message.
    func handle(_ message: MQTTMessage) {
        if let homie, message.topic.hasPrefix(homie.prefix + "/5/") {
            handleHomie(message, homie)
            return
        }
        let group = topics.parseGroupCommandTopic(message.topic)
        guard let address = topics.parseCommandTopic(message.topic) ?? group.map({ ($0.user, "*", "lights") })
        else { return }
        // Every instance receives every command; only the user's owner acts (or rejects).
        guard ownership.owns(address.user) else { return }
        // An empty payload is how a retained command is cleared (README, "MQTT").
        guard !message.payload.isEmpty else {
            logger.debug("ignored an empty command (a cleared retained message)", ["topic": message.topic])
            return
        }
        if isStaleRetained(message) { return }
        let origin = CommandOrigin.mqtt(topic: message.topic, redelivery: message.isRedelivery)
        if let group {
            switch LightCommand.parse(message.payload) {
            case .failure(let rejection):
                reject(rejection, user: group.user, room: nil, origin: origin)
            case .success(let command) where message.isRedelivery && command == .toggle:
                logger.info("ignored a redelivered TOGGLE (already applied)",
                            ["topic": message.topic, "packet_id": String(message.messageID)])
            case .success(let command):
                guard admitted(user: group.user, origin: origin) else { return }
                switchGroup(command, user: group.user, group: group.group, origin: origin)
            }
            return
        }
        let parsed = CommandTarget.resolve(user: address.user, room: address.room, sensor: address.sensor,
                                           in: controller.store.home)
            .flatMap { target in LightCommand.parse(message.payload).map { (target, $0) } }
        switch parsed {
        case .failure(let rejection):
            reject(rejection, user: address.user, room: address.room, origin: origin)
        case .success(let (target, command)):
            // A QoS 1 message the broker sent again after a reconnect (same packet id) was applied on
            // the previous connection: ON/OFF are idempotent, a second TOGGLE would undo the first.
            if message.isRedelivery, command == .toggle {
                logger.info("ignored a redelivered TOGGLE (already applied)",
                            ["topic": message.topic, "packet_id": String(message.messageID)])
                return
            }
            guard admitted(user: target.user.id, origin: origin) else { return }
            submit(command, target: target, origin: origin)
        }
    }

    /// Whether the user's MQTT command is within `commands.rate` (README "Security model"); one over
    /// it is dropped: no state change, no history, no event, a summarised log line.
    private func admitted(user: String, origin: CommandOrigin) -> Bool {
        gate.admit(user: user, source: origin.name) == .admitted
    }

    /// A retained `/set` message (from the broker's store at subscribe time) is never applied: a
    /// stale retained command must never switch lights at every restart (README, "MQTT").
    private func isStaleRetained(_ message: MQTTMessage) -> Bool {
        guard message.retain else { return false }
        // Summarised like rejections: a flood of retained commands is one line per 10 s.
        gate.logRejection(user: "mqtt", reason: "retained", message: "ignored a retained command: a stale retained /set "
            + "message must never switch lights; clear it with an empty retained publish", ["topic": message.topic])
        return true
    }

    /// A Homie controller's `…/lights/set` (`true`/`false`): the same rules as a room's `/set`.
    private func handleHomie(_ message: MQTTMessage, _ homie: HomieDevices) {
        guard let (user, room) = homie.parseSet(message.topic, in: controller.store.home) else {
            gate.logRejection(user: "homie", reason: "unknown_device",
                              ["topic": message.topic, "reason": "unknown_device",
                               "detail": "no Homie device or room of this bridge"])
            return
        }
        guard ownership.owns(user.id), !message.payload.isEmpty else { return }
        if isStaleRetained(message) { return }
        let origin = CommandOrigin.mqtt(topic: message.topic, redelivery: message.isRedelivery)
        switch HomieDevices.command(message.payload) {
        case .failure(let rejection): reject(rejection, user: user.id, room: room.id, origin: origin)
        case .success(let command):
            guard admitted(user: user.id, origin: origin) else { return }
            submit(command, target: CommandTarget(user: user, room: room), origin: origin)
        }
    }

    /// An alarm's action.
    func alarmAction(_ command: LightCommand, user: String, room: String) {
        switch CommandTarget.resolve(user: user, room: room, in: controller.store.home) {
        case .success(let target): submit(command, target: target, origin: .alarm)
        case .failure(let rejection): reject(rejection, user: user, room: room, origin: .alarm)
        }
    }

    /// An alarm's action on a group (`group` nil: every light of the user).
    func alarmGroupAction(_ command: LightCommand, user: String, group: String?) {
        switchGroup(command, user: user, group: group, origin: .alarm)
    }

    /// A group command from MQTT or an alarm: one state for every room of the group.
    private func switchGroup(_ command: LightCommand, user: String, group: String?, origin: CommandOrigin) {
        switch groupTargets(command, user: user, group: group) {
        case .failure(let rejection):
            reject(rejection, user: user, room: nil, origin: origin, topic: groupTopic(user: user, group: group))
        case .success(let (targets, on)):
            for target in targets { submit(on ? .on : .off, target: target, origin: origin) }
        }
    }

    /// The group's rooms and the one state a command gives them all.
    private func groupTargets(_ command: LightCommand, user: String, group: String?)
        -> Result<([CommandTarget], Bool), CommandRejection>
    {
        let home = controller.store.home
        return home.groupTarget(user: user, group: group).map { user, rooms in
            (rooms.map { CommandTarget(user: user, room: $0) }, command.applied(to: home.allLightsOn(user: user.id, rooms: rooms)))
        }
    }

    private func groupTopic(user: String, group: String?) -> String {
        group.map { topics.groupSet(user: user, group: $0) } ?? topics.userLightsSet(user: user)
    }

    /// An API group request (`POST /api/v1/groups/:group/lights`), which waits for every room's
    /// outcome; the first refusal is the answer, the rooms already switched stay switched.
    func switchGroupAndWait(_ command: LightCommand, user: String, group: String?) -> Result<[Reading], CommandRejection> {
        if case .refused(let wait) = gate.admit(user: user, source: "api") { return .failure(.rateLimited(retryAfter: wait)) }
        let (targets, on): ([CommandTarget], Bool)
        switch groupTargets(command, user: user, group: group) {
        case .success(let found): (targets, on) = found
        case .failure(let rejection):
            if ownership.owns(user) {
                reject(rejection, user: user, room: nil, origin: .api, topic: groupTopic(user: user, group: group))
            }
            return .failure(rejection)
        }
        var readings: [Reading] = []
        for target in targets {
            switch switchAndWait(on ? .on : .off, target: target) {
            case .success(let reading): readings.append(reading)
            case .failure(let rejection): return .failure(rejection)
            }
        }
        return .success(readings)
    }

    /// An API request, which waits for the outcome (on libmicrohttpd's thread, which may block).
    func switchAndWait(_ command: LightCommand, user: String, room: String) -> Result<Reading, CommandRejection> {
        if case .refused(let wait) = gate.admit(user: user, source: "api") { return .failure(.rateLimited(retryAfter: wait)) }
        let target: CommandTarget
        switch CommandTarget.resolve(user: user, room: room, in: controller.store.home) {
        case .success(let found): target = found
        case .failure(let rejection):
            if ownership.owns(user) {
                reject(rejection, user: user, room: room, origin: .api)
            } else {
                gate.logRejection(user: user, reason: rejection.code,
                                  ["user": user, "room": room, "reason": rejection.code,
                                   "detail": rejection.description, "source": "api"])
            }
            return .failure(rejection)
        }
        return switchAndWait(command, target: target)
    }

    private func switchAndWait(_ command: LightCommand, target: CommandTarget) -> Result<Reading, CommandRejection> {
        guard ownership.owns(target.user.id) else { return relay(command, target: target) }
        guard lights(target) != nil else { return execute(command, target: target, origin: .api) }
        let done = Rendezvous<Result<Reading, CommandRejection>>()
        guard jobs.submit(Job(command: command, target: target, origin: .api, done: done)) else {
            return .failure(.upstream(status: 0, detail: "too many commands waiting"))
        }
        return done.wait(timeout: switchTimeout) ?? .failure(.upstream(status: 0, detail: "no answer"))
    }

    /// Runs a command now, or hands it to `run()` when a `LightSwitch` must accept it first.
    private func submit(_ command: LightCommand, target: CommandTarget, origin: CommandOrigin) {
        guard lights(target) != nil else {
            execute(command, target: target, origin: origin)
            return
        }
        if !jobs.submit(Job(command: command, target: target, origin: origin, done: nil)) {
            reject(.upstream(status: 0, detail: "too many commands waiting"), user: target.user.id,
                   room: target.room.id, origin: origin)
        }
    }

    // MARK: Carrying out

    /// Carries out queued commands, each in a task of its own so a slow upstream holds up only its
    /// own command; at most `maxWaiting` at once, as the queue.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    self.gate.flushSummaries()
                }
            }
            for await job in jobs.jobs {
                group.addTask {
                    let outcome = await self.forwardThenExecute(job.command, target: job.target, origin: job.origin)
                    job.done?.deliver(outcome)
                }
            }
            group.cancelAll()  // the summaries' ticker
        }
    }

    private func forwardThenExecute(_ command: LightCommand, target: CommandTarget, origin: CommandOrigin) async
        -> Result<Reading, CommandRejection>
    {
        guard let lights = lights(target) else { return execute(command, target: target, origin: origin) }
        let on = command.applied(to: isOn(target))
        switch await lights.switchLight(target, on: on) {
        case .success(.accepted):
            return execute(on ? .on : .off, target: target, origin: origin)
        case .success(.applied):
            logger.info("light switched, confirmed by its device", ["user": target.user.id, "room": target.room.id,
                                                                    "command": command.rawValue,
                                                                    "state": on ? "ON" : "OFF", "source": origin.name])
            return .success(Reading(user: target.user.id, room: target.room.id, sensor: .lights, value: .binary(on)))
        case .failure(let rejection):
            reject(rejection, user: target.user.id, room: target.room.id, origin: origin)
            return .failure(rejection)
        }
    }

    @discardableResult
    private func execute(_ command: LightCommand, target: CommandTarget, origin: CommandOrigin)
        -> Result<Reading, CommandRejection>
    {
        let on = command.applied(to: isOn(target))
        let reading = controller.switchLight(target, on: on, origin: origin)
        logger.info("light switched", ["user": target.user.id, "room": target.room.id, "command": command.rawValue,
                                       "state": reading.value.mqttPayload, "source": origin.name])
        return .success(reading)
    }

    private func isOn(_ target: CommandTarget) -> Bool {
        controller.store.home.value(of: .lights, in: target.key) == .binary(true)
    }

    /// - Parameter topic: the command topic the rejection names when the origin is not MQTT (by
    ///   default the room's `/lights/set`).
    private func reject(_ rejection: CommandRejection, user: String, room: String?, origin: CommandOrigin,
                        topic other: String? = nil) {
        let topic: String
        if case .mqtt(let commandTopic, _) = origin {
            topic = commandTopic
        } else {
            topic = other ?? topics.lightsSet(user: user, room: room ?? "*")
        }
        gate.logRejection(user: user, reason: rejection.code,
                          ["topic": topic, "reason": rejection.code, "detail": rejection.description])
        guard controller.store.home.user(id: user) != nil else { return }
        controller.publishEvent(user: user, .commandRejected(topic: topic, room: room, rejection: rejection,
                                                             source: origin.name, at: Date()))
    }

    // MARK: Cluster

    /// Sends an API light command for a user another instance owns, as explicit `ON`/`OFF` (so a
    /// QoS 1 redelivery cannot undo it), and blocks until the owner's published light state
    /// confirms it or `cluster.command_timeout` passes. (MQTT commands and alarms never need
    /// this: only the owner acts on those.)
    private func relay(_ command: LightCommand, target: CommandTarget) -> Result<Reading, CommandRejection> {
        let on = command.applied(to: isOn(target))
        let owner = ownership.currentOwner(of: target.user.id)
        let fields: KeyValuePairs = ["user": target.user.id, "room": target.room.id, "state": on ? "ON" : "OFF",
                                     "source": "api", "owner": String(owner)]
        guard instanceOnline(owner) else {
            logger.warning("the owning instance is offline; relayed light command not sent", fields)
            return .failure(.ownerOffline(instance: owner))
        }
        let confirmed = confirmations.wait(for: target.key, timeout: relayTimeout, accepts: { $0 == on }) {
            outbound.send(topics.lightsSet(user: target.user.id, room: target.room.id), on ? "ON" : "OFF", retain: false)
        }
        guard confirmed != nil else {
            logger.warning("the owning instance did not confirm a relayed light command", fields)
            return .failure(.ownerTimeout(seconds: relayTimeout))
        }
        logger.info("relayed light command confirmed by the owning instance", fields)
        return .success(Reading(user: target.user.id, room: target.room.id, sensor: .lights, value: .binary(on)))
    }

    /// A mirrored light state confirms a relayed command.
    func receive(_ changes: [StateChange]) {
        for case .reading(let change) in changes where change.origin == .mirror && change.sensor == .lights {
            if case .binary(let on) = change.value { confirmations.deliver(on, for: change.key) }
        }
    }
}
