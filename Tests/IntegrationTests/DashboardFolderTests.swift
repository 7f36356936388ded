import Foundation
import Testing

/// A missing `http.web_root` folder is reported at start, by check-config and at `/`, and the rest of
/// the bridge works without it (README "Web dashboard").
@Suite(.timeLimit(.minutes(1)))
struct DashboardFolderTests {
    @Test func aMissingFolderIsWarnedAboutAndExplainedAtTheRoot() async throws {
        let missing = "/nonexistent-smarthome-web-\(getpid())"
        let bridge = try await BridgeProcess(broker: nil, environment: ["SMARTHOME_HTTP_WEB_ROOT": missing])
        #expect(bridge.log.contains("WARNING http.web_root \(missing) does not exist: the dashboard at / is not served"),
                "\(bridge.log)")
        let root = try await HTTP.get(bridge.httpPort, "/")
        #expect(root.status == 404)
        #expect(root.text.contains("no dashboard is served here"), "\(root.text)")
        #expect(!root.text.contains(missing), "the server's paths are its own business")
        let other = try await HTTP.get(bridge.httpPort, "/app.js")
        #expect(other.status == 404)
        #expect(other.text == #"{"error":{"message":"Not found"}}"#)
        #expect(try await HTTP.get(bridge.httpPort, "/healthz").status == 200)
    }

    @Test func aRelativeFolderIsLookedForInTheWorkingDirectory() async throws {
        let bridge = try await BridgeProcess(broker: nil, environment: ["SMARTHOME_HTTP_WEB_ROOT": "no-such-web"])
        let cwd = FileManager.default.currentDirectoryPath
        #expect(bridge.log.contains("http.web_root \(cwd)/no-such-web (relative to the working directory \(cwd))"),
                "\(bridge.log)")
    }

    @Test func anExistingFolderIsServedWithoutAWarning() async throws {
        let web = TestFiles.repositoryRoot.appendingPathComponent("web").path
        let bridge = try await BridgeProcess(broker: nil, environment: ["SMARTHOME_HTTP_WEB_ROOT": web])
        #expect(!bridge.log.contains("http.web_root"), "\(bridge.log)")
        let root = try await HTTP.get(bridge.httpPort, "/")
        #expect(root.status == 200)
        #expect(root.headers["content-type"]?.hasPrefix("text/html") == true)
    }

    @Test func checkConfigWarnsButPasses() throws {
        let output = try CheckConfigTests.check(CheckConfigTests.users,
                                                environment: ["SMARTHOME_HTTP_WEB_ROOT": "/nonexistent-web"])
        #expect(output.status == 0, "\(output.text)")
        #expect(output.text.contains("OK (1 users, 1 rooms), 1 warning(s)"), "\(output.text)")
        #expect(output.text.contains("warning: http.web_root: /nonexistent-web does not exist"), "\(output.text)")
    }
}
