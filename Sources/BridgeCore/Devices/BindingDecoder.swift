/// Decodes a sensor entry given as a mapping (README, "Connect your devices"):
///
/// ```yaml
/// - { name: Temperature, rtl_433: { model: Bresser-6in1, id: 411042499 }, expire_after: 10m }
/// ```
///
/// `name`, optional `id` and `unit`, exactly one binding key, and the options every binding has.
enum BindingDecoder {
    static let bindingKeys = ["zigbee2mqtt", "tasmota", "shelly", "esphome", "rtl_433", "mqtt", "http"]
    static let commonKeys = ["name", "id", "unit", "expire_after", "offset", "scale", "precision"]

    /// The sensor and its binding (nil: an entry with only `name`, which comes from `source.kind`).
    static func decode(_ fields: [(String, ConfigNode)], path: String, line: Int, issues: inout [ConfigIssue])
        -> (sensor: SensorKind, bound: BoundSensor?)?
    {
        var reader = Reader(path: path, issues: issues)
        defer { issues = reader.issues }
        var named: [String: ConfigNode] = [:]
        for (key, value) in fields {
            guard commonKeys.contains(key) || bindingKeys.contains(key) else {
                reader.fail("\(path).\(key)", "is not a known key (a sensor takes \((commonKeys + bindingKeys).joined(separator: ", ")))",
                            line: value.line)
                continue
            }
            if named[key] != nil { reader.fail("\(path).\(key)", "is set twice", line: value.line) }
            named[key] = value
        }
        guard let name = reader.text(named["name"], "\(path).name", line: line) else { return nil }
        var sensor = SensorKind.named(name)
        if let idNode = named["id"], let id = reader.text(idNode, "\(path).id", line: line) {
            if sensor.isKnown, id != sensor.id {
                reader.fail("\(path).id", "\"\(id)\" cannot rename the known sensor \(sensor.displayName) (its id is \(sensor.id))",
                            line: idNode.line)
            } else if !id.allSatisfy(UsersDecoder.idCharacters.contains) {
                reader.fail("\(path).id", "\"\(id)\" may hold only a-z, 0-9, _ and - (it is a topic level)", line: idNode.line)
            } else {
                sensor = SensorKind.generic(id: id, displayName: name)
            }
        }
        let present = bindingKeys.filter { named[$0] != nil }
        if present.count > 1 {
            reader.fail(path, "has \(present.joined(separator: " and ")): a sensor takes exactly one binding", line: line)
            return nil
        }
        guard let key = present.first, let node = named[key] else {
            for option in ["unit", "expire_after", "offset", "scale", "precision"] where named[option] != nil {
                reader.fail("\(path).\(option)", "needs a binding (\(bindingKeys.joined(separator: ", ")))",
                            line: named[option]?.line ?? line)
            }
            return (sensor, nil)
        }
        let before = reader.issues.count
        guard let binding = decodeBinding(key, node, path: "\(path).\(key)", sensor: sensor, reader: &reader) else {
            return nil
        }
        var bound = BoundSensor(binding: binding)
        bound.expireAfter = reader.duration(named["expire_after"], "\(path).expire_after")
        bound.offset = reader.number(named["offset"], "\(path).offset") ?? 0
        bound.scale = reader.number(named["scale"], "\(path).scale") ?? 1
        if let precision = reader.number(named["precision"], "\(path).precision") {
            if precision == precision.rounded(), (0...6).contains(precision) { bound.precision = Int(precision) } else {
                reader.fail("\(path).precision", "must be a whole number of decimals from 0 to 6", line: named["precision"]?.line ?? 0)
            }
        }
        bound.unit = named["unit"].flatMap { reader.text($0, "\(path).unit", line: line) }
        if bound.unit == nil { bound.unit = reader.mqttUnit }
        if sensor == .lights, !binding.canCommand {
            reader.fail("\(path).\(key)", key == "rtl_433"
                ? "only receives: a light needs a binding that can switch it"
                : "has no command: a light needs command_topic (mqtt) or command (http)", line: node.line)
        }
        return reader.issues.count == before ? (sensor, bound) : nil
    }

    private static func decodeBinding(_ key: String, _ node: ConfigNode, path: String, sensor: SensorKind,
                                      reader: inout Reader) -> SensorBinding? {
        switch key {
        case "zigbee2mqtt":
            guard let fields = reader.mapping(node, path, allowed: ["device", "field"]) else { return nil }
            guard let device = reader.text(fields["device"], "\(path).device", line: node.line) else { return nil }
            return .zigbee2mqtt(device: device, field: fields["field"].flatMap { reader.text($0, "\(path).field", line: node.line) })
        case "tasmota":
            guard let fields = reader.mapping(node, path, allowed: ["topic", "sensor", "relay"]) else { return nil }
            guard let topic = reader.topicLevel(fields["topic"], "\(path).topic", line: node.line) else { return nil }
            let relay = reader.number(fields["relay"], "\(path).relay").flatMap { value -> Int? in
                guard value == value.rounded(), (1...32).contains(value) else {
                    reader.fail("\(path).relay", "must be a relay number from 1 to 32", line: fields["relay"]?.line ?? 0)
                    return nil
                }
                return Int(value)
            }
            return .tasmota(topic: topic, sensor: fields["sensor"].flatMap { reader.text($0, "\(path).sensor", line: node.line) },
                            relay: relay)
        case "shelly":
            guard let fields = reader.mapping(node, path, allowed: ["prefix", "id"]) else { return nil }
            guard let prefix = reader.topic(fields["prefix"], "\(path).prefix", line: node.line) else { return nil }
            let id = reader.number(fields["id"], "\(path).id") ?? 0
            guard id == id.rounded(), id >= 0, id < 1000 else {
                reader.fail("\(path).id", "must be a component id from 0", line: fields["id"]?.line ?? 0)
                return nil
            }
            return .shelly(prefix: prefix, id: Int(id))
        case "esphome":
            guard let fields = reader.mapping(node, path, allowed: ["prefix", "component", "object_id"]) else { return nil }
            guard let prefix = reader.topic(fields["prefix"], "\(path).prefix", line: node.line),
                  let objectID = reader.topicLevel(fields["object_id"], "\(path).object_id", line: node.line)
            else { return nil }
            let component = fields["component"].flatMap { reader.text($0, "\(path).component", line: node.line) }
            if let component, !["sensor", "binary_sensor", "light", "switch", "text_sensor"].contains(component) {
                reader.fail("\(path).component", "\"\(component)\" is not sensor, binary_sensor, light, switch or text_sensor",
                            line: fields["component"]?.line ?? 0)
                return nil
            }
            return .esphome(prefix: prefix, component: component, objectID: objectID)
        case "rtl_433":
            guard let fields = reader.mapping(node, path, allowed: ["model", "id", "channel", "field"]) else { return nil }
            guard let model = reader.text(fields["model"], "\(path).model", line: node.line),
                  let id = reader.text(fields["id"], "\(path).id", line: node.line)
            else { return nil }
            return .rtl433(model: model, id: id,
                           channel: fields["channel"].flatMap { reader.text($0, "\(path).channel", line: node.line) },
                           field: fields["field"].flatMap { reader.text($0, "\(path).field", line: node.line) })
        case "mqtt":
            return decodeMQTT(node, path: path, sensor: sensor, reader: &reader).map { .mqtt($0) }
        case "http":
            return decodeHTTP(node, path: path, reader: &reader).map { .http($0) }
        default:
            return nil
        }
    }

    private static func decodeMQTT(_ node: ConfigNode, path: String, sensor: SensorKind, reader: inout Reader) -> MQTTBinding? {
        let allowed = ["topic", "value", "on", "off", "unit", "command_topic", "payload_on", "payload_off", "state_topic",
                       "state_value", "optimistic", "availability_topic", "payload_available", "payload_not_available"]
        guard let fields = reader.mapping(node, path, allowed: allowed) else { return nil }
        var binding = MQTTBinding()
        binding.topic = fields["topic"].flatMap { reader.topic($0, "\(path).topic", line: node.line) }
        binding.value = reader.pointer(fields["value"], "\(path).value")
        binding.on = reader.words(fields["on"], "\(path).on")
        binding.off = reader.words(fields["off"], "\(path).off")
        reader.mqttUnit = fields["unit"].flatMap { reader.text($0, "\(path).unit", line: node.line) }
        binding.commandTopic = fields["command_topic"].flatMap { reader.topic($0, "\(path).command_topic", line: node.line) }
        binding.payloadOn = fields["payload_on"].flatMap { reader.text($0, "\(path).payload_on", line: node.line) } ?? "ON"
        binding.payloadOff = fields["payload_off"].flatMap { reader.text($0, "\(path).payload_off", line: node.line) } ?? "OFF"
        binding.stateTopic = fields["state_topic"].flatMap { reader.topic($0, "\(path).state_topic", line: node.line) }
        binding.stateValue = reader.pointer(fields["state_value"], "\(path).state_value")
        binding.optimistic = reader.bool(fields["optimistic"], "\(path).optimistic") ?? false
        binding.availabilityTopic = fields["availability_topic"].flatMap {
            reader.topic($0, "\(path).availability_topic", line: node.line)
        }
        binding.payloadAvailable = fields["payload_available"].flatMap {
            reader.text($0, "\(path).payload_available", line: node.line)
        } ?? "online"
        binding.payloadNotAvailable = fields["payload_not_available"].flatMap {
            reader.text($0, "\(path).payload_not_available", line: node.line)
        } ?? "offline"
        if binding.topic == nil, binding.stateTopic == nil, !(sensor == .lights && binding.optimistic) {
            reader.fail("\(path).topic", "is required (where the device publishes)", line: node.line)
            return nil
        }
        return binding
    }

    private static func decodeHTTP(_ node: ConfigNode, path: String, reader: inout Reader) -> HTTPBinding? {
        guard let fields = reader.mapping(node, path, allowed: ["url", "value", "interval", "timeout", "headers", "command"])
        else { return nil }
        guard let url = reader.url(fields["url"], "\(path).url", line: node.line) else { return nil }
        var binding = HTTPBinding(url: url)
        binding.value = reader.pointer(fields["value"], "\(path).value")
        binding.interval = reader.duration(fields["interval"], "\(path).interval")
        binding.timeout = reader.duration(fields["timeout"], "\(path).timeout") ?? 5
        if let headers = fields["headers"] {
            guard case .mapping(let pairs, _) = headers else {
                reader.fail("\(path).headers", "must be a mapping of header names to values", line: headers.line)
                return nil
            }
            for (name, value) in pairs {
                guard let text = reader.text(value, "\(path).headers.\(name)", line: headers.line) else { continue }
                binding.headers.append((name, text))
            }
        }
        if let command = fields["command"] {
            guard let commandFields = reader.mapping(command, "\(path).command", allowed: ["method", "url", "body"]),
                  let commandURL = reader.url(commandFields["url"], "\(path).command.url", line: command.line)
            else { return nil }
            var decoded = HTTPBinding.Command(url: commandURL)
            if let method = commandFields["method"].flatMap({ reader.text($0, "\(path).command.method", line: command.line) }) {
                guard ["GET", "POST", "PUT", "PATCH"].contains(method.uppercased()) else {
                    reader.fail("\(path).command.method", "must be GET, POST, PUT or PATCH", line: command.line)
                    return nil
                }
                decoded.method = method.uppercased()
            }
            decoded.body = commandFields["body"].flatMap { reader.text($0, "\(path).command.body", line: command.line) }
            binding.command = decoded
        }
        return binding
    }
}

/// Reads a binding's values, collecting every problem with its path.
private struct Reader {
    let path: String
    var issues: [ConfigIssue]
    /// A generic MQTT binding's `unit`, carried to the bound sensor.
    var mqttUnit: String?

    init(path: String, issues: [ConfigIssue]) {
        self.path = path
        self.issues = issues
    }

    mutating func fail(_ path: String, _ message: String, line: Int) {
        issues.append(ConfigIssue(path: path, message: message, line: line))
    }

    mutating func mapping(_ node: ConfigNode, _ path: String, allowed: [String]) -> [String: ConfigNode]? {
        guard case .mapping(let pairs, _) = node else {
            fail(path, "must be a mapping with \(allowed.joined(separator: ", "))", line: node.line)
            return nil
        }
        var result: [String: ConfigNode] = [:]
        for (key, value) in pairs {
            if !allowed.contains(key) {
                fail("\(path).\(key)", "is not a known key (\(allowed.joined(separator: ", ")))", line: value.line)
            } else if result[key] != nil {
                fail("\(path).\(key)", "is set twice", line: value.line)
            } else {
                result[key] = value
            }
        }
        return result
    }

    mutating func text(_ node: ConfigNode?, _ path: String, line: Int) -> String? {
        switch node {
        case .scalar(let value, _, let valueLine)?:
            if value.isEmpty { fail(path, "must not be empty", line: valueLine) }
            return value.isEmpty ? nil : value
        case nil, .null?:
            fail(path, "is required", line: node?.line ?? line)
            return nil
        case let other?:
            fail(path, "must be a single value", line: other.line)
            return nil
        }
    }

    /// A topic to subscribe to or publish on: no wildcards.
    mutating func topic(_ node: ConfigNode?, _ path: String, line: Int) -> String? {
        guard let topic = text(node, path, line: line) else { return nil }
        if topic.contains("+") || topic.contains("#") {
            fail(path, "\"\(topic)\" must be a topic, without the wildcards + and #", line: node?.line ?? line)
            return nil
        }
        return topic
    }

    /// One level of a topic (a device's name in its topics).
    mutating func topicLevel(_ node: ConfigNode?, _ path: String, line: Int) -> String? {
        guard let level = topic(node, path, line: line) else { return nil }
        if level.contains("/") {
            fail(path, "\"\(level)\" must be one topic level, without /", line: node?.line ?? line)
            return nil
        }
        return level
    }

    mutating func url(_ node: ConfigNode?, _ path: String, line: Int) -> String? {
        guard let url = text(node, path, line: line) else { return nil }
        guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
            fail(path, "must start with http:// or https://, got \"\(url)\"", line: node?.line ?? line)
            return nil
        }
        return url
    }

    mutating func pointer(_ node: ConfigNode?, _ path: String) -> JSONPointer? {
        guard let node, let text = text(node, path, line: node.line) else { return nil }
        guard let pointer = JSONPointer(text) else {
            fail(path, "\"\(text)\" is not a JSON pointer (RFC 6901: empty, or /member/0, with ~0 for ~ and ~1 for /)",
                 line: node.line)
            return nil
        }
        return pointer
    }

    mutating func number(_ node: ConfigNode?, _ path: String) -> Double? {
        guard let node, let text = text(node, path, line: node.line) else { return nil }
        guard let value = Double(text), value.isFinite else {
            fail(path, "must be a number, got \"\(text)\"", line: node.line)
            return nil
        }
        return value
    }

    mutating func bool(_ node: ConfigNode?, _ path: String) -> Bool? {
        guard let node, let text = text(node, path, line: node.line) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            fail(path, "must be true or false, got \"\(text)\"", line: node.line)
            return nil
        }
    }

    mutating func duration(_ node: ConfigNode?, _ path: String) -> Double? {
        guard let node, let text = text(node, path, line: node.line) else { return nil }
        switch ConfigValue.parseDuration(text) {
        case let seconds? where seconds > 0 && seconds <= 30 * 86_400: return seconds
        default:
            fail(path, "must be a duration such as 30s, 10m or 1h (more than 0, at most 30 days), got \"\(text)\"",
                 line: node.line)
            return nil
        }
    }

    /// One word or a list of words.
    mutating func words(_ node: ConfigNode?, _ path: String) -> [String] {
        switch node {
        case nil: return []
        case .sequence(let items, _)?: return items.enumerated().compactMap { text($1, "\(path)[\($0)]", line: $1.line) }
        case let single?: return text(single, path, line: single.line).map { [$0] } ?? []
        }
    }
}
