import BridgeMQTT
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// An MQTT client for tests (libmosquitto through the bridge's own adapter, but a separate
/// connection with its own client id): records every message it receives.
final class TestSubscriber: Sendable {
    let client: MQTTClient
    private let received = MessageLog()
    private let consumer: Task<Void, Never>

    convenience init(broker: TestBroker, subscribe filters: [String] = [], name: String = "test") async throws {
        try await self.init(broker: broker.port, subscribe: filters, name: name, username: broker.username,
                            password: broker.password)
    }

    /// Returns once the client is connected; throws when it is not within `timeout` seconds.
    init(
        broker port: Int, subscribe filters: [String] = [], name: String = "test", username: String? = nil,
        password: String? = nil, timeout: Double = 10
    ) async throws {
        client = try MQTTClient(configuration: MQTTConfiguration(
            host: "127.0.0.1", port: port, clientID: "\(name)-\(UUID().uuidString.prefix(8))",
            username: username, password: password, keepalive: 10))
        let client = client
        let received = received
        let connections = ConnectionCount()
        consumer = Task {
            for await event in client.events {
                switch event {
                case .message(let message): received.append(message)
                case .connected: connections.add()
                default: break
                }
            }
        }
        for filter in filters { try client.subscribe(filter, qos: 1) }
        try client.start()
        guard await eventually(timeout: timeout, { connections.count > 0 }) else {
            client.stop()
            consumer.cancel()
            throw TestFailure("test client \(name) could not connect to the broker on port \(port) within \(timeout) s")
        }
    }

    var messages: [MQTTMessage] { received.all }

    /// The last payload received on `topic`.
    func last(_ topic: String) -> String? {
        messages.last { $0.topic == topic }?.text
    }

    /// Waits until a message satisfies `predicate`; returns it.
    @discardableResult
    func waitFor(timeout: Double = 10, _ predicate: (MQTTMessage) -> Bool) async throws -> MQTTMessage {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let found = messages.first(where: predicate) { return found }
            try await Task.sleep(for: .milliseconds(20))
        }
        if let found = messages.first(where: predicate) { return found }
        throw TestFailure("no matching message within \(timeout) s; got \(messages.count) messages")
    }

    /// Waits for a message on `topic` with `payload`.
    @discardableResult
    func waitFor(_ topic: String, payload: String? = nil, timeout: Double = 10) async throws -> MQTTMessage {
        try await waitFor(timeout: timeout) { $0.topic == topic && (payload == nil || $0.text == payload) }
    }

    func publish(_ topic: String, _ payload: String, retain: Bool = false) throws {
        try client.publish(topic: topic, text: payload, qos: 1, retain: retain)
    }

    func clear() { received.clear() }

    deinit {
        client.stop()
        consumer.cancel()
    }
}

/// Messages received on the client's thread, read by the test.
final class MessageLog: Sendable {
    private let lock = Mutex<[MQTTMessage]>([])

    func append(_ message: MQTTMessage) { lock.withLock { $0.append(message) } }
    var all: [MQTTMessage] { lock.withLock { $0 } }
    func clear() { lock.withLock { $0.removeAll() } }
}

/// How often a client connected, counted on its thread, read by the test.
final class ConnectionCount: Sendable {
    private let lock = Mutex(0)

    func add() { lock.withLock { $0 += 1 } }
    var count: Int { lock.withLock { $0 } }
}

/// HTTP over a real socket with URLSession.
enum HTTP {
    struct Reply {
        var status: Int
        var body: Data
        var headers: [String: String]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func get(_ port: Int, _ path: String) async throws -> Reply {
        try await send(port, path, method: "GET")
    }

    static func send(
        _ port: Int, _ path: String, method: String, body: Data? = nil, token: String? = nil
    ) async throws -> Reply {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.httpBody = body
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.timeoutInterval = 10
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw TestFailure("not an HTTP response") }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            headers[String(describing: key).lowercased()] = String(describing: value)
        }
        return Reply(status: http.statusCode, body: data, headers: headers)
    }

    /// Polls `path` until it answers `status`.
    static func waitForStatus(_ port: Int, _ path: String, _ status: Int, timeout: Double = 15) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let reply = try? await get(port, path), reply.status == status { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
