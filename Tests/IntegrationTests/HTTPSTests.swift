import BridgeRuntime
import Foundation
import Testing

/// The bridge with `http.tls.cert` / `http.tls.key`: every route over HTTPS on `http.port`, checked with curl
/// against a certificate the test makes with the openssl command; bad files are config errors.
@Suite(.timeLimit(.minutes(2)))
struct HTTPSTests {
    static func makeCertificate(in folder: URL) throws -> (cert: String, key: String) {
        let cert = folder.appendingPathComponent("cert.pem").path
        let key = folder.appendingPathComponent("key.pem").path
        let process = try ChildProcess.spawn("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key, "-out", cert,
        ], environment: ProcessInfo.processInfo.environment, outputPath: folder.appendingPathComponent("openssl.log").path)
        guard process.waitForExit(timeout: 30) == 0 else { throw TestFailure("openssl req failed") }
        return (cert, key)
    }

    static func curl(_ arguments: [String], in folder: URL) throws -> String {
        let out = folder.appendingPathComponent("curl-\(UUID().uuidString).out").path
        let process = try ChildProcess.spawn("/usr/bin/curl", ["-sS", "--max-time", "10"] + arguments,
                                             environment: ProcessInfo.processInfo.environment, outputPath: out)
        _ = process.waitForExit(timeout: 20)
        return (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
    }

    @Test func everyRouteIsServedOverHTTPS() async throws {
        let folder = try TestFiles.makeDirectory("https")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (cert, key) = try Self.makeCertificate(in: folder)
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: """
            http:
              legacy_routes: true
              tls:
                cert: \(cert)
                key: \(key)
            source:
              interval: 30

            """)
        let base = "https://127.0.0.1:\(bridge.httpPort)"
        let health = try Self.curl(["--cacert", cert, "-D", "-", "\(base)/healthz"], in: folder)
        #expect(health.hasPrefix("HTTP/1.1 200"), "\(health.prefix(200))")
        #expect(health.contains("X-Frame-Options: DENY"))
        let login = try Self.curl(["--cacert", cert, "-X", "POST", "-d", #"{"username":"Cemalettin","password":"12345"}"#,
                                   "\(base)/api/v1/login"], in: folder)
        #expect(login.contains(#""token":""#), "\(login.prefix(200))")
        let room = try Self.curl(["--cacert", cert, "\(base)/rooms/1/Kitchen"], in: folder)
        #expect(room.hasPrefix(#"{"SensorNames""#))
        #expect(await bridge.waitForLog("scheme=https"))
    }

    @Test func unreadableOrNonPEMFilesAreConfigErrorsNamingTheKey() throws {
        let folder = try TestFiles.makeDirectory("https-bad")
        defer { try? FileManager.default.removeItem(at: folder) }
        let notPEM = folder.appendingPathComponent("key.txt").path
        try "hello".write(toFile: notPEM, atomically: true, encoding: .utf8)
        let output = try CheckConfigTests.check("""
            http:
              tls:
                cert: /nonexistent/cert.pem
                key: \(notPEM)
            \(CheckConfigTests.users)
            """)
        #expect(output.status == 1)
        #expect(output.text.contains("http.tls.cert: cannot read /nonexistent/cert.pem"), "\(output.text)")
        #expect(output.text.contains("http.tls.key: \(notPEM) is not a PEM file"), "\(output.text)")
        let half = try CheckConfigTests.check("http:\n  tls:\n    cert: /x.pem\n\(CheckConfigTests.users)")
        #expect(half.text.contains("http.tls.key: must be set together with http.tls.cert"), "\(half.text)")
    }
}
