import Testing
@testable import BridgeCore

/// The lookups every request makes: its headers by name, and the room route's room by name or id.
@Suite struct RequestLookupTests {
    @Test func headersAreFoundByLowerCaseNameWithRepeatsJoined() {
        let headers = HTTPHeaders([("Host", "bridge.lan"), ("X-Repeated", "a"), ("x-repeated", "b"),
                                   ("Cookie", "one=1"), ("COOKIE", "two=2"), ("Empty", "")])
        #expect(headers["host"] == "bridge.lan")
        #expect(headers["x-repeated"] == "a, b")
        #expect(headers["cookie"] == "one=1; two=2")
        #expect(headers["empty"] == "")
        #expect(headers["missing"] == nil)
        #expect(headers["Host"] == nil, "names are asked for in lower case")
        let literal: HTTPHeaders = ["authorization": "Bearer x"]
        #expect(literal["authorization"] == "Bearer x")
    }

    @Test func aPathSplitsIntoItsSegmentsEmptyOnesKept() {
        #expect(HTTPRoutes.pathSegments("/rooms/1/Kitchen") == ["rooms", "1", "Kitchen"])
        #expect(HTTPRoutes.pathSegments("/rooms/1/") == ["rooms", "1", ""])
        #expect(HTTPRoutes.pathSegments("//a") == ["", "a"])
        #expect(HTTPRoutes.pathSegments("/") == [""])
        #expect(HTTPRoutes.pathSegments("") == [])
        #expect(HTTPRoutes.pathSegments("no-slash") == [])
        #expect(HTTPRoutes.pathSegments("/api/v1/rooms/wohnzimmer süd/history") == ["api", "v1", "rooms", "wohnzimmer süd", "history"])
        #expect(HTTPRoutes.pathSegments("/a-segment-longer-than-fifteen-bytes/x") == ["a-segment-longer-than-fifteen-bytes", "x"])
    }

    @Test func aRoomIsFoundByIdOrByNameInAnyCaseFirstMatchFirst() {
        let user = User(id: "1", username: "u", passwordHash: "", rooms: [
            Room(id: "living", name: "Wohnzimmer Süd", sensors: [.lights]),
            Room(id: "kitchen", name: "Kitchen", sensors: [.lights]),
            Room(id: "k2", name: "KITCHEN", sensors: [.gas]),
            Room(id: "kv", name: "\u{212A}elvin", sensors: [.gas]),
        ])
        #expect(user.room(named: "kitchen")?.id == "kitchen")
        #expect(user.room(named: "KiTcHeN")?.id == "kitchen")
        #expect(user.room(named: "k2")?.id == "k2")
        #expect(user.room(named: "WOHNZIMMER SÜD")?.id == "living")
        #expect(user.room(named: "wohnzimmer süd")?.id == "living")
        // The Kelvin sign lower-cases to an ASCII "k": matched as `lowercased()` matches it.
        #expect(user.room(named: "kelvin")?.id == "kv")
        #expect(user.room(named: "Kelvin")?.id == "kv")
        #expect(user.room(named: "kitche") == nil)
        #expect(user.room(named: "") == nil)
    }
}
