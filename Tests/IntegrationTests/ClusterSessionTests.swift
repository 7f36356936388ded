import Foundation
import Testing

/// Signed sessions across real bridge processes: two instances with the same `cluster.secret`, each
/// with its own database, accept each other's tokens over HTTP; another secret does not.
@Suite(.timeLimit(.minutes(3)))
struct ClusterSessionTests {
    static let secret = "shared-secret-for-the-session-tests-0123456789"

    static func bridge(_ broker: TestBroker, name: String, secret: String?) async throws -> BridgeProcess {
        // Own client id and topics, so the instances don't kick each other off the broker.
        var environment = ["SMARTHOME_MQTT_CLIENT_ID": "sessions-\(name)", "SMARTHOME_MQTT_BASE_TOPIC": "home-\(name)"]
        if let secret { environment["SMARTHOME_CLUSTER_SECRET"] = secret }
        return try await BridgeProcess(broker: broker, environment: environment)
    }

    static func rooms(_ bridge: BridgeProcess, _ token: String) async throws -> HTTP.Reply {
        try await HTTP.send(bridge.httpPort, "/api/v1/rooms", method: "GET", token: token)
    }

    @Test func aTokenFromOneInstanceWorksOnAnotherWithTheSameSecret() async throws {
        let broker = try await TestBroker()
        let first = try await Self.bridge(broker, name: "a", secret: Self.secret)
        let second = try await Self.bridge(broker, name: "b", secret: Self.secret)
        let stranger = try await Self.bridge(broker, name: "c", secret: String(Self.secret.reversed()))
        let unclustered = try await Self.bridge(broker, name: "d", secret: nil)
        #expect(first.directory != second.directory, "separate databases")

        let token = try await APITests.token(first.httpPort, "Cemalettin", "12345")
        let onFirst = try await Self.rooms(first, token)
        let onSecond = try await Self.rooms(second, token)
        #expect(onFirst.status == 200)
        #expect(onSecond.status == 200)
        let rooms = { (reply: HTTP.Reply) in try JSONDecoder().decode(roomModel.self, from: reply.body).rooms }
        // The demo users have the same rooms in another order: the order says whose they are.
        #expect(try rooms(onSecond) == rooms(onFirst))
        #expect(try rooms(onSecond).first == "Livingroom", "Cemalettin's rooms: \(onSecond.text)")

        let fromSecond = try await APITests.token(second.httpPort, "Mehmet", "123456")
        #expect(try await Self.rooms(first, fromSecond).status == 200, "and the other way round")

        #expect(try await Self.rooms(stranger, token).status == 401, "another secret")
        #expect(try await Self.rooms(unclustered, token).status == 401, "no secret: that database's own key")
        let local = try await APITests.token(unclustered.httpPort, "Cemalettin", "12345")
        #expect(try await Self.rooms(first, local).status == 401)

        #expect(try await HTTP.send(first.httpPort, "/api/v1/logout", method: "POST", token: token).status == 204)
        #expect(try await Self.rooms(first, token).status == 401, "logged out where it logged in")
        #expect(try await HTTP.send(second.httpPort, "/api/v1/logout", method: "POST", token: fromSecond).status
            == 204)
        #expect(try await Self.rooms(second, fromSecond).status == 401)
        // These instances share a secret but are no cluster (cluster.instances is 1), so none tells
        // the others of a logout; instances of one cluster do (the next test, and SessionTokenTests
        // for SessionService.revokeRemote itself).
    }

    /// Instance `index` of a cluster of two on `broker`, with its own database.
    static func instance(_ index: Int, broker: TestBroker) async throws -> BridgeProcess {
        try await BridgeProcess(
            broker: broker, settings: "http:\n  legacy_routes: true\nsource:\n  interval: 3600\n  seed: 1\n",
            environment: ["SMARTHOME_CLUSTER_INSTANCES": "2", "SMARTHOME_CLUSTER_INDEX": String(index),
                          "SMARTHOME_CLUSTER_SECRET": secret, "SMARTHOME_HOMEASSISTANT_DISCOVERY": "false"])
    }

    /// README, Sessions: in a cluster a logout is published retained on
    /// `<base>/bridge/revoked/<session id>` (payload: the expiry), and every instance refuses the
    /// token, one that was down at the time included.
    @Test func aLogoutIsPublishedRetainedAndRefusedByEveryInstanceEvenOneStartedLater() async throws {
        let broker = try await TestBroker()
        let first = try await Self.instance(0, broker: broker)
        var second: BridgeProcess? = try await Self.instance(1, broker: broker)
        let token = try await APITests.token(first.httpPort, "Cemalettin", "12345")
        let kept = try await APITests.token(first.httpPort, "Cemalettin", "12345")
        #expect(try await Self.rooms(try #require(second), token).status == 200)

        let loggedOut = Date()
        #expect(try await HTTP.send(first.httpPort, "/api/v1/logout", method: "POST", token: token).status == 204)
        let reader = try await TestSubscriber(broker: broker, subscribe: ["smarthome/bridge/revoked/+"])
        let revocation = try await reader.waitFor { $0.retain && !$0.payload.isEmpty }
        let id = try #require(revocation.topic.split(separator: "/").last)
        #expect(revocation.topic == "smarthome/bridge/revoked/\(id)" && id.count >= 16, "\(revocation.topic)")
        let expiry = try #require(Double(revocation.text), "payload \(revocation.text)")
        let ttl = 30 * 86_400.0  // http.session_ttl's default
        #expect(expiry >= loggedOut.timeIntervalSince1970 + ttl - 60 && expiry <= Date().timeIntervalSince1970 + ttl + 2,
                "expiry \(expiry)")
        #expect(reader.messages.filter { $0.retain && !$0.payload.isEmpty }.count == 1, "one logout, one revocation")

        let refused = try await ClusterTests.poll(until: { $0 == 401 }) { try await Self.rooms(try #require(second), token).status }
        #expect(refused == 401, "the other instance still accepts a logged-out token")

        // An instance that was not running at the logout, with a database that never heard of it.
        second = nil
        let later = try await Self.instance(1, broker: broker)
        let refusedLater = try await ClusterTests.poll(until: { $0 == 401 }) { try await Self.rooms(later, token).status }
        #expect(refusedLater == 401, "an instance started after the logout accepts the token")
        #expect(await later.waitForLog("session revoked by another instance"))
        #expect(try await Self.rooms(later, kept).status == 200, "another session of the same user still works")
    }
}
