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

    /// - Parameters:
    ///   - lights: where a target's commands go before the state changes (its device, or a source
    ///     that takes them), nil when the bridge keeps the light itself.
    ///   - switchTimeout: how long an API request waits for `lights` at most.
    init(controller: HomeController, configuration: BridgeConfiguration, outbound: Outbound, logger: Logger,
         lights: @escaping @Sendable (CommandTarget) -> (any LightSwitch)?, switchTimeout: Double,
         instanceOnline: @escaping @Sendable (Int) -> Bool = { _ in true }) {
        self.controller = controller
        self.outbound = outbound
        self.logger = logger
        self.lights = lights
        self.switchTimeout = switchTimeout
        self.instanceOnline = instanceOnline
        topics = Topics(base: configuration.mqtt.baseTopic)
        qos = configuration.mqtt.qos
        relayTimeout = configuration.cluster.commandTimeout
    }

    var subscriptions: [MQTTSubscription] { [MQTTSubscription(filter: topics.commandFilter, qos: qos)] }

    private var membership: ClusterMembership { controller.membership }

    // MARK: Entry points

    /// An MQTT `/set` message.
    func handle(_ message: MQTTMessage) {
        guard let address = topics.parseCommandTopic(message.topic) else { return }
        // Every instance receives every command; only the user's owner acts (or rejects).
        guard membership.owns(address.user) else { return }
        // An empty payload is how a retained command is cleared (README, "MQTT").
        guard !message.payload.isEmpty else {
            logger.debug("ignored an empty command (a cleared retained message)", ["topic": message.topic])
            return
        }
        if message.retain {
            logger.warning("ignored a retained command: a stale retained /set message must never switch lights; "
                + "clear it with an empty retained publish", ["topic": message.topic])
            return
        }
        let origin = CommandOrigin.mqtt(topic: message.topic, redelivery: message.isRedelivery)
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
            submit(command, target: target, origin: origin)
        }
    }

    /// An alarm's action.
    func alarmAction(_ command: LightCommand, user: String, room: String) {
        switch CommandTarget.resolve(user: user, room: room, in: controller.store.home) {
        case .success(let target): submit(command, target: target, origin: .alarm)
        case .failure(let rejection): reject(rejection, user: user, room: room, origin: .alarm)
        }
    }

    /// An API request, which waits for the outcome (on libmicrohttpd's thread, which may block).
    func switchAndWait(_ command: LightCommand, user: String, room: String) -> Result<Reading, CommandRejection> {
        let target: CommandTarget
        switch CommandTarget.resolve(user: user, room: room, in: controller.store.home) {
        case .success(let found): target = found
        case .failure(let rejection):
            if membership.owns(user) {
                reject(rejection, user: user, room: room, origin: .api)
            } else {
                logger.warning("command rejected", ["user": user, "room": room, "reason": rejection.code,
                                                    "detail": rejection.description, "source": "api"])
            }
            return .failure(rejection)
        }
        guard membership.owns(user) else { return relay(command, target: target) }
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
            for await job in jobs.jobs {
                group.addTask {
                    let outcome = await self.forwardThenExecute(job.command, target: job.target, origin: job.origin)
                    job.done?.deliver(outcome)
                }
            }
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

    private func reject(_ rejection: CommandRejection, user: String, room: String, origin: CommandOrigin) {
        let topic: String
        if case .mqtt(let commandTopic, _) = origin { topic = commandTopic } else { topic = topics.lightsSet(user: user, room: room) }
        logger.warning("command rejected", ["topic": topic, "reason": rejection.code, "detail": rejection.description])
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
        let owner = membership.owner(of: target.user.id)
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
