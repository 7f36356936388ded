import BridgeCore
import BridgeHTTP
import Foundation
import Testing

/// HTTPS through libmicrohttpd's GnuTLS, with a certificate the test makes with the openssl command and real
/// TLS requests made with curl.
@Suite("HTTPS")
struct TLSTests {
    /// A self-signed certificate for 127.0.0.1 and localhost, and its key, in a fresh folder.
    struct Certificate {
        let folder: URL
        var certificate: String { folder.appendingPathComponent("cert.pem").path }
        var key: String { folder.appendingPathComponent("key.pem").path }

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let status = try run("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-keyout", key, "-out", certificate]).status
            guard status == 0 else { throw TLSTestFailure("openssl req exited with \(status)") }
        }
    }

    struct TLSTestFailure: Error { let message: String; init(_ message: String) { self.message = message } }

    @Test func everyRequestIsServedOverTLSAndPlainHTTPIsNot() throws {
        let made = try Certificate()
        defer { try? FileManager.default.removeItem(at: made.folder) }
        let tls = HTTPServerConfiguration.TLS(certificateFile: made.certificate, keyFile: made.key)
        let (server, recorder) = try startRecordingServer(HTTPServerConfiguration(port: 0, tls: tls))
        defer { server.stop() }

        let fetched = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "--cacert", made.certificate,
                                                "-D", "-", "https://127.0.0.1:\(server.port)/ping?x=1"])
        #expect(fetched.status == 0, "curl: \(fetched.output)")
        #expect(fetched.output.hasPrefix("HTTP/1.1 200"))
        #expect(fetched.output.hasSuffix("ok"))
        #expect(recorder.all.map(\.path) == ["/ping"])

        // Without the certificate's trust, curl refuses the server: it really is that certificate.
        let untrusted = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "https://127.0.0.1:\(server.port)/ping"])
        #expect(untrusted.status != 0)
        // Plain HTTP to the TLS port gets no HTTP answer.
        #expect(ping(port: server.port)?.status == nil)
        #expect(recorder.all.count == 1)
    }

    @Test func aMissingFileOrAMismatchedKeyIsAClearStartError() throws {
        let made = try Certificate()
        let other = try Certificate()
        defer {
            try? FileManager.default.removeItem(at: made.folder)
            try? FileManager.default.removeItem(at: other.folder)
        }
        let missing = HTTPServer(configuration: HTTPServerConfiguration(port: 0, tls: .init(
            certificateFile: made.folder.appendingPathComponent("nope.pem").path, keyFile: made.key))) { _ in
            HTTPResponse(status: 200)
        }
        #expect { try missing.start() } throws: { error in
            "\(error)".contains("cannot read the TLS certificate") && "\(error)".contains("nope.pem")
        }
        let mismatched = HTTPServer(configuration: HTTPServerConfiguration(port: 0, tls: .init(
            certificateFile: made.certificate, keyFile: other.key))) { _ in HTTPResponse(status: 200) }
        #expect { try mismatched.start() } throws: { error in "\(error)".contains("certificate or key was refused") }
    }
}

/// Runs a command to its end; its standard output and error together.
func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
