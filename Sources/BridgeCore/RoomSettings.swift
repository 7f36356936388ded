/// `GET /api/v1/rooms?detail=1` (README, "Managing the home"): each of the user's rooms with where
/// it comes from and its sensors in the shapes the `POST`/`PUT` bodies take, so that a client (the
/// settings page) can show them and send them back edited.
public enum RoomSettings {
    /// `{"id","name","origin":"file"|"api","sensors":[...]}` per room, in the user's order. A room
    /// made through the API shows its sensor list as it was stored; a config file room's list is
    /// rebuilt from its decoded sensors (presets with their fields; a generic binding by its key).
    public static func rooms(_ user: User, managed: [ManagedRoom]) -> JSONValue {
        .array(user.rooms.map { room in
            let row = managed.first { $0.user == user.id && $0.id == room.id }
            let sensors = row.flatMap { APIBody.anyJSON(Array($0.sensors.utf8)) }.map { ConfigNode.fromJSON($0).json }
                ?? .array(room.sensors.map { entry($0, room.bindings[$0]) })
            return .object([
                ("id", .string(room.id)), ("name", .string(room.name)),
                ("origin", .string(row == nil ? "file" : "api")), ("sensors", sensors),
            ])
        })
    }

    /// One sensor as a sensor list has it: its name, or a mapping with its binding.
    static func entry(_ sensor: SensorKind, _ bound: BoundSensor?) -> JSONValue {
        guard let bound else { return .string(sensor.displayName) }
        return .object([("name", .string(sensor.displayName)), (bound.binding.key, .object(fields(bound.binding)))])
    }

    private static func fields(_ binding: SensorBinding) -> [(String, JSONValue)] {
        func optional(_ name: String, _ value: String?) -> [(String, JSONValue)] { value.map { [(name, .string($0))] } ?? [] }
        switch binding {
        case .zigbee2mqtt(let device, let field):
            return [("device", .string(device))] + optional("field", field)
        case .tasmota(let topic, let sensor, let relay):
            return [("topic", .string(topic))] + optional("sensor", sensor) + (relay.map { [("relay", .number(Double($0)))] } ?? [])
        case .shelly(let prefix, let id):
            return [("prefix", .string(prefix)), ("id", .number(Double(id)))]
        case .esphome(let prefix, let component, let objectID):
            return [("prefix", .string(prefix))] + optional("component", component) + [("object_id", .string(objectID))]
        case .rtl433(let model, let id, let channel, let field):
            return [("model", .string(model)), ("id", .string(id))] + optional("channel", channel) + optional("field", field)
        case .mqtt(let mqtt):
            return optional("topic", mqtt.topic) + optional("command_topic", mqtt.commandTopic)
        case .http(let http):
            return [("url", .string(http.url))]
        }
    }
}
