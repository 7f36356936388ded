/// A bound sensor resolved to MQTT: what it reads where, where its commands go, and where its
/// device says whether it is online. Each preset in its device's own conventions (README,
/// "Connect your devices", names the versions followed).
public struct DeviceTopics: Sendable, Equatable {
    /// A topic (or filter: rtl_433's `rtl_433/+/events`) and how to get the value out of it.
    public struct Read: Sendable, Equatable {
        public var filter: String
        public var extractor: ValueExtractor
    }

    /// Where a light's command goes and what it says.
    public struct Command: Sendable, Equatable {
        public var topic: String
        public var on: String
        public var off: String
    }

    /// The device's own online/offline topic.
    public struct Availability: Sendable, Equatable {
        public var topic: String
        /// Payload words (any case) meaning online and offline; a JSON `{"state":...}` is read too.
        public var online: [String]
        public var offline: [String]

        /// `true`/`false` for a payload that says so, nil for anything else.
        public func isOnline(_ payload: [UInt8]) -> Bool? {
            var word = String(decoding: payload.prefix(256), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if word.hasPrefix("{"), let object = DevicePayload.json(payload) as? [String: Any],
               let state = object["state"] as? String {
                word = state
            }
            let lower = word.lowercased()
            if online.contains(where: { $0.lowercased() == lower }) { return true }
            if offline.contains(where: { $0.lowercased() == lower }) { return false }
            return nil
        }
    }

    public var reads: [Read]
    public var command: Command?
    public var availability: Availability?
    /// A light whose device never reports: a sent command counts as done.
    public var optimistic = false
}

extension BoundSensor {
    /// The MQTT side of the binding for `sensor`; nil for an HTTP binding.
    /// - Parameter zigbeeBase: `devices.zigbee2mqtt.base_topic`.
    public func topics(for sensor: SensorKind, zigbeeBase: String) -> DeviceTopics? {
        let isLight = sensor == .lights
        switch binding {
        case .zigbee2mqtt(let device, let field):
            let state = "\(zigbeeBase)/\(device)"
            let member = field ?? Self.zigbeeField(sensor)
            return DeviceTopics(
                reads: [.init(filter: state, extractor: .pointer(JSONPointer(member: member)))],
                command: isLight ? .init(topic: state + "/set", on: #"{"state":"ON"}"#, off: #"{"state":"OFF"}"#) : nil,
                availability: .init(topic: state + "/availability", online: ["online"], offline: ["offline"]))
        case .tasmota(let topic, let block, let relay):
            let power = "POWER" + (relay.map(String.init) ?? "")
            let availability = DeviceTopics.Availability(topic: "tele/\(topic)/LWT", online: ["Online"], offline: ["Offline"])
            guard isLight else {
                return DeviceTopics(reads: [.init(filter: "tele/\(topic)/SENSOR",
                                                  extractor: .tasmota(block: block, field: Self.tasmotaField(sensor)))],
                                    availability: availability)
            }
            return DeviceTopics(
                reads: [.init(filter: "stat/\(topic)/\(power)", extractor: .whole),
                        .init(filter: "stat/\(topic)/RESULT", extractor: .pointerIfPresent(JSONPointer(member: power))),
                        .init(filter: "tele/\(topic)/STATE", extractor: .pointer(JSONPointer(member: power)))],
                command: .init(topic: "cmnd/\(topic)/\(power)", on: "ON", off: "OFF"),
                availability: availability)
        case .shelly(let prefix, let id):
            let availability = DeviceTopics.Availability(topic: "\(prefix)/online", online: ["true"], offline: ["false"])
            if isLight {
                return DeviceTopics(
                    reads: [.init(filter: "\(prefix)/status/switch:\(id)", extractor: .pointer(JSONPointer(member: "output")))],
                    command: .init(topic: "\(prefix)/command/switch:\(id)", on: "on", off: "off"),
                    availability: availability)
            }
            let (component, member) = sensor == .humidity ? ("humidity", "rh") : (sensor == .temperature
                ? ("temperature", "tC") : (sensor.id, "value"))
            return DeviceTopics(reads: [.init(filter: "\(prefix)/status/\(component):\(id)",
                                              extractor: .pointer(JSONPointer(member: member)))],
                                availability: availability)
        case .esphome(let prefix, let component, let objectID):
            let kind = component ?? (isLight ? "light" : sensor.isNumeric ? "sensor" : "binary_sensor")
            let state = "\(prefix)/\(kind)/\(objectID)/state"
            let command: DeviceTopics.Command? = switch (isLight, kind) {
            case (true, "light"): .init(topic: "\(prefix)/light/\(objectID)/command", on: #"{"state":"ON"}"#,
                                        off: #"{"state":"OFF"}"#)
            case (true, _): .init(topic: "\(prefix)/\(kind)/\(objectID)/command", on: "ON", off: "OFF")
            default: nil
            }
            return DeviceTopics(
                reads: [.init(filter: state, extractor: kind == "light" ? .pointer(JSONPointer(member: "state")) : .whole)],
                command: command,
                availability: .init(topic: "\(prefix)/status", online: ["online"], offline: ["offline"]))
        case .rtl433(let model, let id, let channel, let field):
            return DeviceTopics(reads: [.init(filter: "rtl_433/+/events",
                                              extractor: .rtl433(model: model, id: id, channel: channel, field: field))])
        case .mqtt(let mqtt):
            var reads: [DeviceTopics.Read] = []
            let stateTopic = isLight ? (mqtt.stateTopic ?? mqtt.topic) : mqtt.topic
            let pointer = isLight ? (mqtt.stateValue ?? mqtt.value) : mqtt.value
            if let stateTopic { reads.append(.init(filter: stateTopic, extractor: pointer.map { .pointer($0) } ?? .whole)) }
            return DeviceTopics(
                reads: reads,
                command: mqtt.commandTopic.map { .init(topic: $0, on: mqtt.payloadOn, off: mqtt.payloadOff) },
                availability: mqtt.availabilityTopic.map {
                    .init(topic: $0, online: [mqtt.payloadAvailable], offline: [mqtt.payloadNotAvailable])
                },
                optimistic: mqtt.optimistic || (isLight && stateTopic == nil))
        case .http:
            return nil
        }
    }

    /// zigbee2mqtt's exposes: temperature, humidity, occupancy, gas, state.
    static func zigbeeField(_ sensor: SensorKind) -> String {
        switch sensor {
        case .movement: "occupancy"
        case .lights: "state"
        default: sensor.id
        }
    }

    /// Tasmota's SENSOR members: `Temperature`, `Humidity`, else the display name.
    static func tasmotaField(_ sensor: SensorKind) -> String {
        sensor.displayName
    }

    /// The words a binary sensor's device uses for ON and OFF, beyond the common ones.
    public var onOffWords: (on: [String], off: [String]) {
        if case .mqtt(let mqtt) = binding { return (mqtt.on + [mqtt.payloadOn], mqtt.off + [mqtt.payloadOff]) }
        return ([], [])
    }
}
