import BridgeMQTT
import BridgeRuntime
import Foundation
import Testing

/// TLS to the broker beyond trusting its CA (README, Configuration, `mqtt.tls.*`): the broker's
/// name is checked unless `mqtt.tls.verify` is false, and the bridge presents `mqtt.tls.cert` and
/// `mqtt.tls.key` to a broker that requires a client certificate. Certificates come from the
/// openssl command line (TestPKI); BrokerAccessTests covers an untrusted CA.
@Suite(.timeLimit(.minutes(3)))
struct BrokerTLSTests {
    /// An anonymous mosquitto with one TLS listener on a free loopback port.
    final class TLSBroker: @unchecked Sendable {
        private(set) var port = 0
        let directory: URL
        private var process: ChildProcess?

        init(pki: TestPKI, cert: String, key: String, requireClientCertificate: Bool = false) async throws {
            directory = try TestFiles.makeDirectory("tls-broker")
            try await TestBroker.onFreePort { port in
                self.port = port
                let config = directory.appendingPathComponent("mosquitto.conf")
                try """
                    listener \(port) 127.0.0.1
                    cafile \(pki.caFile)
                    certfile \(cert)
                    keyfile \(key)
                    require_certificate \(requireClientCertificate)
                    allow_anonymous true
                    persistence false
                    log_dest stderr
                    log_type error
                    log_type warning
                    log_type notice

                    """.write(to: config, atomically: true, encoding: .utf8)
                process = try await TestBroker.launch(config: config, port: port,
                                                      log: directory.appendingPathComponent("log"))
            }
        }

        var url: String { "mqtts://127.0.0.1:\(port)" }

        deinit {
            process?.terminate()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// A bridge that must not get through: `/healthz` stays 503 for 2 s and it never connects.
    static func expectRefused(_ environment: [String: String], _ comment: Comment) async throws {
        let bridge = try await UnconnectedBridge(environment: environment)
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 503), comment)
        for _ in 0..<10 {
            #expect(try await HTTP.get(bridge.httpPort, "/healthz").status == 503, comment)
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(!bridge.log.contains("connected to broker"), comment)
    }

    @Test func theBrokersNameIsCheckedUnlessVerifyIsFalse() async throws {
        let directory = try TestFiles.makeDirectory("tls-names")
        defer { try? FileManager.default.removeItem(at: directory) }
        let pki = try TestPKI(directory: directory)
        // Signed by the trusted CA, but for another host than the 127.0.0.1 the bridge dials.
        let elsewhere = try pki.issue("elsewhere", subject: "/CN=broker.invalid",
                                      extensions: "subjectAltName=DNS:broker.invalid\nextendedKeyUsage=serverAuth\n")
        let broker = try await TLSBroker(pki: pki, cert: elsewhere.cert, key: elsewhere.key)
        let environment = ["SMARTHOME_MQTT_URL": broker.url, "SMARTHOME_MQTT_TLS_CA": pki.caFile]

        try await Self.expectRefused(environment, "a certificate for broker.invalid was accepted for 127.0.0.1")

        // Everything the same but the name check: it connects and publishes its state.
        var unchecked = environment
        unchecked["SMARTHOME_MQTT_TLS_VERIFY"] = "false"
        let bridge = try await BridgeProcess(broker: nil, environment: unchecked)
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 200))
        let reader = try AccountClient(port: broker.port, username: nil, password: nil,
                                       tls: MQTTConfiguration.TLS(caFile: pki.caFile, verifyHostname: false),
                                       subscribe: ["smarthome/bridge/state"])
        #expect(try await reader.waitFor { $0.topic == "smarthome/bridge/state" && $0.retain }.text == "online")
    }

    @Test func aClientCertificateIsPresentedWhenTheBrokerRequiresOne() async throws {
        let directory = try TestFiles.makeDirectory("tls-client")
        defer { try? FileManager.default.removeItem(at: directory) }
        let pki = try TestPKI(directory: directory)
        let client = try pki.issue("client", subject: "/CN=smarthome-bridge", extensions: "extendedKeyUsage=clientAuth\n")
        let broker = try await TLSBroker(pki: pki, cert: pki.certFile, key: pki.keyFile, requireClientCertificate: true)
        let environment = ["SMARTHOME_MQTT_URL": broker.url, "SMARTHOME_MQTT_TLS_CA": pki.caFile]

        try await Self.expectRefused(environment, "connected without a client certificate")

        var withCertificate = environment
        withCertificate["SMARTHOME_MQTT_TLS_CERT"] = client.cert
        withCertificate["SMARTHOME_MQTT_TLS_KEY"] = client.key
        let bridge = try await BridgeProcess(broker: nil, environment: withCertificate)
        #expect(await HTTP.waitForStatus(bridge.httpPort, "/healthz", 200))
        let reader = try AccountClient(port: broker.port, username: nil, password: nil,
                                       tls: MQTTConfiguration.TLS(caFile: pki.caFile, certFile: client.cert,
                                                                  keyFile: client.key),
                                       subscribe: ["smarthome/1/kitchen/temperature"])
        #expect(Double(try await reader.waitFor { $0.topic == "smarthome/1/kitchen/temperature" && $0.retain }.text) != nil)
    }
}
