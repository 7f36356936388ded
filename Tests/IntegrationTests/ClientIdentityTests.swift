import BridgeMQTT
import BridgeRuntime
import Foundation
import Testing

/// The bridge's default MQTT client id (README, "MQTT", client ids) against a real mosquitto run
/// with the password file and ACL `smarthome-bridge mosquitto-acl` writes: another account
/// connecting with the id derived from the base topic takes nothing over; one that does use the
/// bridge's id is noticed and logged; the id stays the same across restarts on one database.
///
/// mosquitto logs "Client <id> already connected, closing old connection." when it hands a client
/// id to a new connection, and "New client connected ... as <id>" once it has accepted one, so the
/// broker's log is the barrier: by the time the second line is there, the first would be too.
@Suite(.timeLimit(.minutes(3)))
struct ClientIdentityTests {
    static let oldDefault = "smarthome-bridge-smarthome"

    static func clientID(in log: String) throws -> String {
        let line = try #require(log.split(separator: "\n").first { $0.contains("connecting to broker") })
        let match = try #require(line.firstMatch(of: /client_id=(\S+)/))
        return String(match.1)
    }

    @Test func anotherAccountCannotTakeTheBridgesConnectionOver() async throws {
        let files = try AccessFiles.make()
        let broker = try await SecuredBroker(files: files)
        let storage = try TestFiles.makeDirectory("client-id")
        defer { try? FileManager.default.removeItem(at: storage) }
        let database = storage.appendingPathComponent("bridge.sqlite").path
        var bridge: BridgeProcess? = try await BridgeProcess(
            broker: nil, storagePath: database, environment: files.bridgeEnvironment(url: broker.url))
        let first = try #require(bridge)
        #expect(await HTTP.waitForStatus(first.httpPort, "/healthz", 200))
        let id = try Self.clientID(in: first.log)
        #expect(id.wholeMatch(of: /smarthome-bridge-smarthome-[0-9a-f]{16}/) != nil, "client id \(id)")

        // Cemalettin connects with the id that used to be the default: a client of its own.
        let guess = try AccountClient(port: broker.port, username: "Cemalettin",
                                      password: BrokerAccessTests.cemalettinPassword, clientID: Self.oldDefault)
        #expect(await guess.firstOutcome() == "connected")
        #expect(await broker.waitForLog("as \(Self.oldDefault)"), "broker log:\n\(broker.log)")
        #expect(!broker.log.contains("already connected"), "broker log:\n\(broker.log)")
        #expect(!first.log.contains("lost connection to broker"), "bridge log:\n\(first.log)")
        #expect(try await HTTP.get(first.httpPort, "/healthz").status == 200)

        // Had he learnt the bridge's id, he would take its connection over, again and again while
        // both reconnect: the broker says so, and so does the bridge.
        let takeover = try AccountClient(port: broker.port, username: "Cemalettin",
                                         password: BrokerAccessTests.cemalettinPassword, clientID: id)
        #expect(await takeover.firstOutcome() == "connected")
        #expect(await broker.waitForLog("Client \(id) already connected, closing old connection"),
                "broker log:\n\(broker.log)")
        #expect(await first.waitForLog("another client may be connecting with client id \(id),", timeout: 90),
                "bridge log:\n\(first.log)")
        takeover.client.stop()

        // The id is kept in the database: the same after a restart on it, another on a new one.
        bridge = nil
        let restarted = try await BridgeProcess(
            broker: nil, storagePath: database, environment: files.bridgeEnvironment(url: broker.url))
        #expect(await HTTP.waitForStatus(restarted.httpPort, "/healthz", 200))
        #expect(try Self.clientID(in: restarted.log) == id)
        let other = try await BridgeProcess(broker: nil, environment: files.bridgeEnvironment(url: broker.url))
        let otherID = try Self.clientID(in: other.log)
        #expect(otherID != id && otherID.hasPrefix("smarthome-bridge-smarthome-"), "\(otherID) and \(id)")

        // mqtt.client_id, when set, is used as it is.
        var environment = files.bridgeEnvironment(url: broker.url)
        environment["SMARTHOME_MQTT_CLIENT_ID"] = "kitchen-bridge-7"
        let chosen = try await BridgeProcess(broker: nil, environment: environment)
        #expect(try Self.clientID(in: chosen.log) == "kitchen-bridge-7")
    }
}
