import BridgeCore

/// Where every bound sensor's readings come from, built from the rooms (README, "Connect your
/// devices"): the device topics with the sensors reading each, the availability topics, the
/// lights, the HTTP devices, the sensors with `expire_after`, and each room's devices. Built again
/// when rooms change while running (README, "Managing the home").
struct DeviceBindings: Sendable {
    /// One bound sensor reading one topic.
    struct Entry: Sendable {
        var key: RoomKey
        var sensor: SensorKind
        var bound: BoundSensor
        var extractor: ValueExtractor

        var sensorKey: SensorKey { SensorKey(room: key, sensor: sensor.id) }
    }

    struct SensorKey: Hashable, Sendable {
        var room: RoomKey
        var sensor: String
    }

    var exactReads: [String: [Entry]] = [:]
    var wildcardReads: [(filter: String, entries: [Entry])] = []
    var availability: [String: (DeviceTopics.Availability, [RoomKey])] = [:]
    var lights: [RoomKey: (topics: DeviceTopics?, http: HTTPBinding?)] = [:]
    var httpSensors: [(entry: Entry, binding: HTTPBinding)] = []
    var expiring: [(key: SensorKey, seconds: Double)] = []
    /// Each room with devices: its availability topics and sensors.
    var rooms: [RoomKey: (devices: [String], sensors: [SensorKey])] = [:]

    init(users: [User], zigbeeBase: String) {
        var wildcard: [String: [Entry]] = [:]
        for user in users {
            for room in user.rooms where !room.bindings.isEmpty {
                let key = RoomKey(user: user.id, room: room.id)
                var devices: [String] = []
                var sensors: [SensorKey] = []
                for sensor in room.sensors {
                    guard let bound = room.bindings[sensor] else { continue }
                    let sensorKey = SensorKey(room: key, sensor: sensor.id)
                    sensors.append(sensorKey)
                    if let seconds = bound.expireAfter { expiring.append((sensorKey, seconds)) }
                    if case .http(let binding) = bound.binding {
                        // An HTTP device counts among the room's devices: online while its polls succeed.
                        devices.append(Self.httpDevice(sensorKey))
                        httpSensors.append((Entry(key: key, sensor: sensor, bound: bound,
                                                  extractor: binding.value.map { .pointer($0) } ?? .whole), binding))
                        if sensor == .lights { lights[key] = (nil, binding) }
                        continue
                    }
                    guard let topics = bound.topics(for: sensor, zigbeeBase: zigbeeBase) else { continue }
                    for read in topics.reads {
                        let entry = Entry(key: key, sensor: sensor, bound: bound, extractor: read.extractor)
                        if read.filter.contains("+") || read.filter.contains("#") {
                            wildcard[read.filter, default: []].append(entry)
                        } else {
                            exactReads[read.filter, default: []].append(entry)
                        }
                    }
                    if let device = topics.availability {
                        var known = availability[device.topic] ?? (device, [])
                        if !known.1.contains(key) { known.1.append(key) }
                        availability[device.topic] = known
                        if !devices.contains(device.topic) { devices.append(device.topic) }
                    }
                    if sensor == .lights { lights[key] = (topics, nil) }
                }
                rooms[key] = (devices, sensors)
            }
        }
        wildcardReads = wildcard.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Every topic and filter the devices publish on.
    var filters: [String] {
        Array(exactReads.keys).sorted() + wildcardReads.map(\.filter) + Array(availability.keys).sorted()
    }

    /// The entries reading `topic`.
    func entries(for topic: String, matches: (String, String) -> Bool) -> [Entry] {
        var entries = exactReads[topic] ?? []
        for (filter, matching) in wildcardReads where matches(filter, topic) { entries += matching }
        return entries
    }

    /// The availability key of an HTTP-bound sensor, beside the MQTT devices' availability topics.
    static func httpDevice(_ key: SensorKey) -> String { "http:\(key.room.user)/\(key.room.room)/\(key.sensor)" }
}
