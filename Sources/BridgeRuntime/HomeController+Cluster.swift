import BridgeCore
import BridgeMQTT
import BridgeStorage
import Foundation

/// Cluster (issue #11): how an instance serves users another instance owns. It keeps their state
/// from what the owner publishes, and relays their light commands to the owner over MQTT.
extension HomeController {
    /// Sends an API light command for a user another instance owns, as explicit `ON`/`OFF` (so a
    /// QoS 1 redelivery cannot undo it), and blocks (on libmicrohttpd's thread) until the owner's
    /// published light state confirms it or `cluster.command_timeout` passes. (MQTT commands and
    /// alarms never need this: only the owner acts on those.)
    func relay(_ command: LightCommand, user: String, room: String, source: String)
        -> Result<Reading, CommandRejection>
    {
        let owner: User
        let target: Room
        switch store.home.commandTarget(user: user, room: room) {
        case .success(let found): (owner, target) = found
        case .failure(let rejection):
            logger.warning("command rejected", ["user": user, "room": room, "reason": rejection.code,
                                                "detail": rejection.description, "source": source])
            return .failure(rejection)
        }
        let key = RoomKey(user: owner.id, room: target.id)
        let on = command.applied(to: store.home.value(of: .lights, in: key) == .binary(true))
        let topic = topics.lightsSet(user: owner.id, room: target.id)
        let timeout = configuration.cluster.commandTimeout
        let fields: KeyValuePairs = ["user": owner.id, "room": target.id, "state": on ? "ON" : "OFF",
                                     "source": source, "owner": String(membership.owner(of: owner.id))]
        let confirmed = confirmations.wait(for: key, timeout: timeout, accepts: { $0 == on }) {
            publish(topic, on ? "ON" : "OFF", retain: false)
        }
        guard confirmed != nil else {
            logger.warning("the owning instance did not confirm a relayed light command", fields)
            return .failure(.ownerTimeout(seconds: timeout))
        }
        logger.info("relayed light command confirmed by the owning instance", fields)
        return .success(Reading(user: owner.id, room: target.id, sensor: .lights, value: .binary(on)))
    }

    /// Handles a message on the cluster's mirror subscriptions; returns `false` when it is none of
    /// theirs (a command, say).
    func mirror(_ message: MQTTMessage) -> Bool {
        if let user = topics.parseEventsTopic(message.topic) {
            mirrorEvent(message, user: user)
            return true
        }
        guard let parsed = topics.parseSensorTopic(message.topic) else { return false }
        if parsed.sensor == "availability" {
            // Another instance announced one of our rooms offline (it saw an old `offline` of ours
            // while we were restarting): correct it, unless the room really is offline.
            let key = RoomKey(user: parsed.user, room: parsed.room)
            if membership.owns(parsed.user), message.text == "offline", !store.withLock({ $0.offline.contains(key) }) {
                publish(message.topic, "online")
            }
            return true
        }
        // Our own readings come back on the same subscription: nothing to do.
        guard !membership.owns(parsed.user), !message.payload.isEmpty else { return true }
        guard let user = store.home.user(id: parsed.user), user.rooms.contains(where: { $0.id == parsed.room }) else {
            logger.debug("ignored a reading for a user or room this config does not have", ["topic": message.topic])
            return true
        }
        let sensor = SensorKind.named(parsed.sensor)
        guard let value = SensorValue.parse(message.text, for: sensor) else {
            logger.warning("ignored a reading from another instance that does not parse",
                           ["topic": message.topic, "payload": String(message.text.prefix(40))])
            return true
        }
        let time = Date()
        store.withLock { state in
            _ = state.home.record(Reading(user: parsed.user, room: parsed.room, sensor: sensor, value: value), at: time)
        }
        // Not recorded: the owner keeps the user's history, and the history route asks it.
        streamState(HistoryStore.Row(user: parsed.user, room: parsed.room, sensor: sensor.id, time: time,
                                     value: value.mqttPayload))
        if sensor == .lights, case .binary(let on) = value {
            confirmations.deliver(on, for: RoomKey(user: parsed.user, room: parsed.room))
        }
        return true
    }

    /// An event the owner published for a user this instance does not own: passed on to that
    /// user's event streams here, as they are.
    private func mirrorEvent(_ message: MQTTMessage, user: String) {
        guard !membership.owns(user), store.home.user(id: user) != nil else { return }
        guard let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
              let type = object["type"] as? String,
              let bytes = ServerSentEvents.event(type, json: message.text)
        else {
            logger.warning("ignored an event from another instance that is not a JSON event",
                           ["topic": message.topic, "payload": String(message.text.prefix(40))])
            return
        }
        events.send(user: user, bytes: bytes)
    }
}
