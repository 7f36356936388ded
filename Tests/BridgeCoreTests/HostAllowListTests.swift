import Testing
@testable import BridgeCore

@Suite struct HostAllowListTests {
    @Test func byDefaultLoopbackNamesAndTheBindAddressAreAnswered() {
        let local = HostAllowList(configured: nil, bind: "192.168.1.10")
        for header in ["localhost", "localhost:8080", "LOCALHOST.", "127.0.0.1:8080", "[::1]:8080", "192.168.1.10:8080",
                       " localhost:8080", "\tlocalhost \t", "  [::1]:8080 "] {
            #expect(local.allows(hostHeader: header), "\(header)")
        }
        for header in ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "[::2]:8080", "", " \t ",
                       "local host", " évil.example "] {
            #expect(!local.allows(hostHeader: header), "\(header)")
        }
        #expect(local.allows(hostHeader: nil), "HTTP/1.0 without Host")
        #expect(!HostAllowList(configured: nil, bind: "0.0.0.0").allows(hostHeader: "0.0.0.0"))
    }

    @Test func aConfiguredListReplacesTheDefaultAndStarAllowsAny() {
        let list = HostAllowList(configured: "bridge.lan, [fd00::5] ,192.168.1.10", bind: "0.0.0.0")
        #expect(list.allows(hostHeader: "Bridge.LAN:8080"))
        #expect(list.allows(hostHeader: "[fd00::5]:8080"))
        #expect(!list.allows(hostHeader: "localhost"), "the list is the whole list")
        #expect(HostAllowList(configured: "*", bind: "0.0.0.0").allows(hostHeader: "anything"))
    }

    /// Up to eight allowed names a header is compared with each byte for byte; a longer list is hashed.
    /// Both answer alike, names sent exactly as allowed or not.
    @Test func aShortListAndALongOneAnswerAlike() {
        let names = ["localhost", "127.0.0.1", "[::1]", "bridge.lan"]
        let short = HostAllowList(configured: names.joined(separator: ","), bind: "0.0.0.0")
        let long = HostAllowList(configured: (names + (1...8).map { "extra\($0).lan" }).joined(separator: ","), bind: "0.0.0.0")
        let allowed = ["localhost", "localhost:8080", "localhost:", "127.0.0.1:18080", "[::1]:8080", "[::1]", "bridge.lan:80",
                       "Bridge.Lan", " localhost", "localhost\t", "::1", "bridge.lan.", "[bridge.lan]x"]
        let refused = ["localhost.evil", "127.0.0.1:8080:9", "[::1", "bridge", "bridge.lan..", "[bridge]:80"]
        for header in allowed + refused {
            #expect(short.allows(hostHeader: header) == allowed.contains(header), "\(header)")
            #expect(long.allows(hostHeader: header) == allowed.contains(header), "\(header)")
        }
    }

    @Test func routesAnswer421ToOtherHosts() {
        var routes = HTTPRoutesTests().routes()
        routes.allowedHosts = HostAllowList(configured: nil, bind: "127.0.0.1")
        let health = HTTPRoutes.Health(mqttConnected: true, mqttProblem: nil, broker: "b", uptimeSeconds: 1)
        func status(_ host: String) -> Int {
            routes.respond(to: HTTPRequest(method: "GET", path: "/healthz", headers: ["host": host]),
                           home: { Fixtures.home() }, health: { health }).status
        }
        #expect(status("127.0.0.1:8080") == 200)
        #expect(status("rebound.example:8080") == 421)
        let refused = routes.respond(to: HTTPRequest(method: "GET", path: "/healthz", headers: ["host": "x.example"]),
                                     home: { Fixtures.home() }, health: { health })
        #expect(String(decoding: refused.body, as: UTF8.self).contains("http.allowed_hosts"))
        #expect(refused.header("X-Frame-Options") == "DENY")
    }

    @Test func unsafeBindingsAreWarnedAbout() throws {
        var config = try ConfigLoaderTests().load(["users": Fixtures.minimalUsers]).get()
        #expect(config.warnings.isEmpty)
        config.http.bind = "0.0.0.0"
        config.http.legacyRoutes = true
        let warnings = config.warnings
        #expect(warnings.contains { $0.hasPrefix("http.legacy_routes is on and http.bind 0.0.0.0") })
        #expect(warnings.contains { $0.contains("without TLS") })
        #expect(warnings.contains { $0.contains("http.allowed_hosts") })
    }
}

@Suite struct ClientAddressTests {
    @Test func forwardedForIsBelievedOnlyFromTrustedProxies() {
        let trusted: Set<String> = ["10.0.0.1", "10.0.0.2"]
        func client(_ peer: String, _ header: String?) -> String {
            ClientAddress.of(HTTPRequest(method: "GET", path: "/", headers: header.map { ["x-forwarded-for": $0] } ?? [:],
                                         clientAddress: peer), trustedProxies: trusted)
        }
        #expect(client("10.0.0.1", "198.51.100.9") == "198.51.100.9")
        #expect(client("10.0.0.1", "1.1.1.1, 198.51.100.9, 10.0.0.2") == "198.51.100.9", "the right-most untrusted")
        #expect(client("10.0.0.1", nil) == "10.0.0.1")
        #expect(client("192.0.2.5", "198.51.100.9") == "192.0.2.5", "an untrusted peer's header is ignored")
        #expect(client("10.0.0.1", "10.0.0.2") == "10.0.0.1")
    }
}
