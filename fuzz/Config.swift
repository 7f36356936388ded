import BridgeCore
import BridgeYAML
import Glibc

/// Fuzzes reading a config file: `YAMLConfigReader.parse` (libyaml) and then `ConfigLoader.load`.
///
/// The input is YAML text, optionally followed by a NUL byte and `KEY=VALUE` lines that become the environment
/// variables `SMARTHOME_KEY=VALUE` (so `MQTT_BASE_TOPIC=x` overrides `mqtt.base_topic`).
///
/// Invariants: a YAML error is one issue with a message and a 1-based line; text that is not UTF-8 is refused
/// when read from a file; every node of a parsed tree has a 1-based line and at most 100 collections above it
/// (aliases included: that limit is what keeps recursion over the tree off the end of the stack); a rejected
/// config has at least one issue, each with a non-empty message and description, and not more issues than
/// four per byte of input (plus a few); a loaded config has at least one user, user ids and usernames unique,
/// every id a non-reserved topic level of `a-z 0-9 _ -`, an argon2id hash, at least one room per user with ids
/// unique per user and at least one sensor per room, none twice; its values lie in their documented ranges
/// and environment overrides win.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let split = input.firstIndex(of: 0) ?? input.endIndex
    let yaml = Array(input[..<split])
    let text = String(decoding: yaml, as: UTF8.self)
    let environment = split < input.endIndex ? environmentVariables(input[(split + 1)...]) : [:]
    if String(validating: yaml, as: UTF8.self) == nil {
        checkFileRefused(yaml)
    }

    let document: ConfigNode
    do {
        document = try YAMLConfigReader.parse(text)
    } catch {
        require(!error.message.isEmpty && !error.description.isEmpty, "YAML error without a message: \(error)")
        require(error.line >= 1, "YAML error without a line: \(error)")
        return 0
    }
    checkLines(document)

    switch ConfigLoader.load(document, environment: environment) {
    case .success(let configuration):
        checkLoaded(configuration, environment: environment)
    case .failure(let rejected):
        require(!rejected.issues.isEmpty, "a rejected config has no issues")
        require(rejected.issues.count <= 4 * input.count + 10,
                "\(input.count) bytes of config gave \(rejected.issues.count) issues")
        for issue in rejected.issues {
            require(!issue.message.isEmpty && !issue.description.isEmpty && issue.line >= 0,
                    "issue without a message: \(issue.path.debugDescription) line \(issue.line)")
        }
    }
    return 0
}

private func environmentVariables(_ bytes: ArraySlice<UInt8>) -> [String: String] {
    var environment: [String: String] = [:]
    for line in bytes.split(separator: UInt8(ascii: "\n")) {
        guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else { continue }
        let name = "SMARTHOME_" + String(decoding: line[..<equals], as: UTF8.self)
        environment[name] = String(decoding: line[(equals + 1)...], as: UTF8.self)
    }
    return environment
}

/// `YAMLConfigReader.parseFile` hands the file's bytes to libyaml unchanged, so invalid UTF-8 must be refused.
/// The bytes go to an unlinked temporary file read back through /proc/self/fd.
private func checkFileRefused(_ yaml: [UInt8]) {
    guard let file = scratchFile else { return }
    let descriptor = fileno(file)
    guard ftruncate(descriptor, 0) == 0,
          yaml.withUnsafeBytes({ pwrite(descriptor, $0.baseAddress, $0.count, 0) }) == yaml.count
    else { fatalError("cannot write the scratch file: \(String(cString: strerror(errno)))") }
    do {
        let node = try YAMLConfigReader.parseFile(atPath: "/proc/self/fd/\(descriptor)")
        fatalError("invalid UTF-8 \(excerpt(yaml)) was read as \(node)")
    } catch {
        require(!error.message.isEmpty && error.line >= 1, "invalid UTF-8 gave the issue \(error)")
    }
}

private nonisolated(unsafe) let scratchFile = tmpfile()

/// Every node read from the file carries its 1-based line and has at most 100 collections above it. Aliases
/// share subtrees, so an expanded tree can be exponentially large: the walk stops after a fixed number of nodes.
private func checkLines(_ root: ConfigNode) {
    var pending = [(node: root, depth: 0)]
    var budget = 100_000
    while let (node, depth) = pending.popLast(), budget > 0 {
        budget -= 1
        require(node.line >= 1, "node \(node) has line \(node.line)")
        switch node {
        case .mapping(let entries, _):
            require(depth < 100, "a mapping at line \(node.line) is nested \(depth + 1) collections deep")
            pending += entries.map { ($0.value, depth + 1) }
        case .sequence(let items, _):
            require(depth < 100, "a sequence at line \(node.line) is nested \(depth + 1) collections deep")
            pending += items.map { ($0, depth + 1) }
        case .scalar, .null: break
        }
    }
}

private let idBytes = Set("abcdefghijklmnopqrstuvwxyz0123456789_-".utf8)

private func isTopicLevelID(_ id: String) -> Bool {
    !id.isEmpty && id.utf8.allSatisfy(idBytes.contains)
}

private func checkLoaded(_ configuration: BridgeConfiguration, environment: [String: String]) {
    let users = configuration.users
    require(!users.isEmpty, "a loaded config has no users")
    require(Set(users.map(\.id)).count == users.count, "user ids repeat: \(users.map(\.id))")
    require(Set(users.map(\.username)).count == users.count, "usernames repeat: \(users.map(\.username))")
    for user in users {
        require(isTopicLevelID(user.id) && user.id != "bridge", "user id \(user.id.debugDescription) accepted")
        require(!user.username.isEmpty, "user \(user.id) has an empty username")
        require(user.passwordHash.hasPrefix("$argon2id$"), "user \(user.id) has a hash that is not argon2id")
        require(!user.rooms.isEmpty, "user \(user.id) has no rooms")
        let roomIDs = user.rooms.map(\.id)
        require(Set(roomIDs).count == roomIDs.count, "user \(user.id) has room ids twice: \(roomIDs)")
        for room in user.rooms {
            require(isTopicLevelID(room.id) && room.id != "events", "room id \(room.id.debugDescription) accepted")
            require(!room.name.isEmpty, "room \(room.id) of user \(user.id) has an empty name")
            require(!room.sensors.isEmpty && Set(room.sensors).count == room.sensors.count,
                    "room \(room.id) of user \(user.id) has sensors \(room.sensors)")
        }
    }

    let mqtt = configuration.mqtt
    require(Topics.validateBase(mqtt.baseTopic) == nil, "base topic \(mqtt.baseTopic.debugDescription) accepted")
    require((0...2).contains(mqtt.qos), "qos \(mqtt.qos) accepted")
    require(mqtt.reconnectMin <= mqtt.reconnectMax, "reconnect_min \(mqtt.reconnectMin) > max \(mqtt.reconnectMax)")
    require((mqtt.tlsCert == nil) == (mqtt.tlsKey == nil), "only one of mqtt.tls.cert and mqtt.tls.key accepted")
    require(mqtt.username != nil || (mqtt.password == nil && mqtt.passwordFile == nil), "password without username")
    if let url = mqtt.url {
        require(!url.host.isEmpty && (1...65_535).contains(url.port), "broker URL \(url) accepted")
    }
    require((0...65_535).contains(configuration.http.port), "http.port \(configuration.http.port) accepted")
    require(configuration.cluster.index < configuration.cluster.instances, "cluster.index >= cluster.instances")
    require(configuration.source.kind != .rest || configuration.source.baseURL != nil, "rest source without base_url")

    if let base = environment["SMARTHOME_MQTT_BASE_TOPIC"] {
        require(mqtt.baseTopic == base, "SMARTHOME_MQTT_BASE_TOPIC=\(base) lost to \(mqtt.baseTopic)")
    }
    if let bind = environment["SMARTHOME_HTTP_BIND"] {
        require(configuration.http.bind == bind, "SMARTHOME_HTTP_BIND=\(bind) lost to \(configuration.http.bind)")
    }
}
