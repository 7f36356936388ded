import Testing
@testable import BridgeCore

@Suite struct HTTPRoutesTests {
    let home = Fixtures.home()
    let healthy = HTTPRoutes.Health(mqttConnected: true, mqttProblem: nil, broker: "mqtt://b:1", uptimeSeconds: 1)

    func routes(legacy: Bool = true) -> HTTPRoutes {
        HTTPRoutes(
            legacyRoutes: legacy,
            loginGate: LoginGate(verifyPassword: { password, hash in hash == "$argon2id$hash-1" && password == "12345" },
                                 now: { 0 }),
            sessions: SessionServices(create: { _ in "t" }, resolve: { _ in nil }, revoke: { _ in }),
            alarms: Fixtures.NoAlarms(),
            history: Fixtures.NoHistory(),
            schedule: AlarmSchedule(timeZone: .gmt, grace: 600),
            openEvents: { _ in .accepted { sink in sink.finish(with: []) } },
            switchLight: { _, _, _ in .failure(.noLights(room: "none")) }
        )
    }

    func get(_ path: String, method: String = "GET", legacy: Bool = true,
             health: HTTPRoutes.Health? = nil) -> (Int, String) {
        let response = routes(legacy: legacy).respond(
            to: HTTPRequest(method: method, path: path), home: { home }, health: { health ?? healthy })
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    @Test func theRootSaysWhyThereIsNoDashboard() {
        let (status, body) = get("/")
        #expect(status == 404)
        #expect(body.contains("no dashboard is served here") && body.contains("http.web_root"), "\(body)")
        #expect(get("/index.html") == (404, #"{"error":{"message":"Not found"}}"#))
    }

    @Test func seedRoutes() {
        #expect(get("/login/Cemalettin/12345").1.hasPrefix(#"{"userID":"1","rooms":["livingroom""#))
        #expect(get("/login/Cemalettin/wrong") == (200, #"{"userID":"0"}"#))
        #expect(get("/login/Nobody/12345") == (200, #"{"userID":"0"}"#))
        #expect(get("/rooms/2").1.hasPrefix(#"{"rooms":["Garden","Bathroom""#))
        #expect(get("/rooms/1/Kitchen").1.hasPrefix(#"{"SensorNames":["Temperature","Humidity","Lights","Gas"]"#))
        #expect(get("/rooms/1/kitchen").0 == 200)
        #expect(get("/rooms/1/KITCHEN").0 == 200)
    }

    @Test func aPathWithNULIsRefused() {
        let (status, body) = get("/index.html\u{0}.png")
        #expect(status == 400)
        #expect(body.contains("NUL"))
    }

    @Test func unknownThingsAre404WithTheErrorShape() {
        for path in ["/rooms/9", "/rooms/1/Attic", "/rooms/9/Kitchen", "/nothing", "/rooms", "/rooms/1/Kitchen/x",
                     "/login/a"] {
            #expect(get(path) == (404, #"{"error":{"message":"Not found"}}"#), "\(path)")
        }
    }

    @Test func legacyRoutesAreOffUnlessEnabled() {
        #expect(get("/rooms/1", legacy: false).0 == 404)
        #expect(get("/login/Cemalettin/12345", legacy: false).0 == 404)
        #expect(get("/healthz", legacy: false).0 == 200)
    }

    @Test func wrongMethodIs405() {
        let response = routes().respond(to: HTTPRequest(method: "POST", path: "/rooms/1"), home: { home },
                                        health: { healthy })
        #expect(response.status == 405)
        #expect(response.header("Allow") == "GET, HEAD")
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"error":{"message":"Method not allowed"}}"#)
        #expect(get("/healthz", method: "DELETE").0 == 405)
        #expect(get("/rooms/1", method: "HEAD").0 == 200)
    }

    @Test func healthzFollowsTheBroker() {
        #expect(get("/healthz").0 == 200)
        #expect(get("/healthz").1.hasPrefix(#"{"status":"ok","mqtt":"connected""#))
        let down = HTTPRoutes.Health(mqttConnected: false, mqttProblem: "broker refused: not authorised",
                                     broker: "mqtt://b:1", uptimeSeconds: 5)
        let (status, body) = get("/healthz", health: down)
        #expect(status == 503)
        #expect(body.contains(#""mqtt":"disconnected""#))
        #expect(body.contains("not authorised"))
    }

    @Test func metricsAreInPrometheusTextFormat() {
        let down = HTTPRoutes.Health(mqttConnected: false, mqttProblem: nil, broker: "b", uptimeSeconds: 42,
                                     mqttQueued: 7, mqttDropped: 3)
        let response = routes().respond(to: HTTPRequest(method: "GET", path: "/metrics"), home: { home },
                                        health: { down })
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(response.status == 200)
        #expect(response.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        for line in ["smarthome_mqtt_connected 0", "smarthome_mqtt_queued_messages 7",
                     "smarthome_mqtt_dropped_messages_total 3", "smarthome_uptime_seconds 42", "smarthome_users 2",
                     "smarthome_rooms 16", "# TYPE smarthome_mqtt_dropped_messages_total counter"] {
            #expect(text.split(separator: "\n").contains(Substring(line)), "\(line) missing")
        }
        #expect(get("/metrics", method: "POST").0 == 405)
    }

    @Test func jsonResponsesSayTheyAreJSON() {
        let response = routes().respond(to: HTTPRequest(method: "GET", path: "/rooms/1"), home: { home },
                                        health: { healthy })
        #expect(response.header("content-type")?.hasPrefix("application/json") == true)
    }

    @Test func headerNamesIgnoreASCIICaseOnly() {
        #expect(HTTPHeaderName.equal("Content-Type", "content-TYPE"))
        #expect(!HTTPHeaderName.equal("Content-Type", "Content-Typf"))
        #expect(!HTTPHeaderName.equal("Content-Type", "Content-Type "))
        #expect(!HTTPHeaderName.equal("[", "{"), "only letters fold")
        #expect(HTTPHeaderName.lowercased("X-Frame-Options") == "x-frame-options")
        #expect(HTTPHeaderName.lowercased("cookie") == "cookie")
        #expect(HTTPHeaderName.lowercased("X-Ünïcode") == "x-Ünïcode")
        let response = HTTPRoutes.secured(HTTPResponse(status: 200, headers: [("x-frame-options", "SAMEORIGIN")]))
        #expect(response.headers.filter { HTTPHeaderName.equal($0.name, "X-Frame-Options") }.count == 1)
        #expect(response.header("X-FRAME-OPTIONS") == "SAMEORIGIN")
        #expect(response.header("Referrer-Policy") == "no-referrer")
    }
}

@Suite struct BearerTokenTests {
    func token(_ header: String) -> String? {
        HTTPRoutes.bearerToken(HTTPRequest(method: "GET", path: "/api/v1/rooms", headers: ["authorization": header]))
    }

    @Test func theSchemeIsCaseInsensitiveAndBlanksAroundAreIgnored() {
        #expect(token("Bearer abc.def") == "abc.def")
        #expect(token("bearer abc") == "abc")
        #expect(token("BEARER   abc  ") == "abc")
        #expect(token("  Bearer abc") == "abc")
        #expect(token("bEaReR\tabc") == "abc")
    }

    @Test func anythingElseIsNoToken() {
        #expect(token("") == nil)
        #expect(token("Bearer") == nil)
        #expect(token("Bearer ") == nil)
        #expect(token("Bearerabc") == nil)
        #expect(token("Basic abc") == nil)
        #expect(token("Bearex abc") == nil)
        #expect(token("Bearer-abc") == nil)
        #expect(token("Bearer " + String(repeating: "a", count: 1025)) == nil)
        #expect(token("Bearer " + String(repeating: "a", count: 1024))?.count == 1024)
    }
}
