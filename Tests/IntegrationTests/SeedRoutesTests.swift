import BridgeRuntime
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The original app's models, exactly as the iPhone app declares them.
struct userModel: Codable { let userID: String }
struct roomModel: Decodable { let rooms: [String]; let roomsicon: [String] }
struct sensorsModel: Decodable { let SensorNames: [String]; let SensorValues: [String]; let SensorIcon: [String] }

/// The seed routes over a real socket, decoded with the app's own structs.
@Suite(.timeLimit(.minutes(2)))
struct SeedRoutesTests {
    @Test func theAppsModelsDecodeEveryRoute() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort

        let login = try await HTTP.get(port, "/login/Cemalettin/12345")
        #expect(login.status == 200)
        #expect(login.headers["content-type"]?.hasPrefix("application/json") == true)
        #expect(try JSONDecoder().decode(userModel.self, from: login.body).userID == "1")
        let loginRooms = try JSONSerialization.jsonObject(with: login.body) as? [String: Any]
        #expect(loginRooms?["rooms"] as? [String]
            == ["livingroom", "bathroom", "bedroom", "kitchen", "garden", "saloon", "babyroom", "balcony"])
        #expect(try JSONDecoder().decode(userModel.self, from: try await HTTP.get(port, "/login/Mehmet/123456").body)
            .userID == "2")

        for (user, names) in [("1", ["Livingroom", "Bathroom", "Bedroom", "Kitchen", "Garden", "Saloon", "Babyroom",
                                     "Balcony"]),
                              ("2", ["Garden", "Bathroom", "Bedroom", "Kitchen", "Saloon", "Livingroom", "Babyroom",
                                     "Balcony"])] {
            let rooms = try JSONDecoder().decode(roomModel.self, from: try await HTTP.get(port, "/rooms/\(user)").body)
            #expect(rooms.rooms == names)
            #expect(rooms.roomsicon == names.map { $0.lowercased() })
            for name in names {
                let reply = try await HTTP.get(port, "/rooms/\(user)/\(name)")
                #expect(reply.status == 200)
                let sensors = try JSONDecoder().decode(sensorsModel.self, from: reply.body)
                let last = name == "Kitchen" || name == "Bathroom" ? "Gas" : "Movement"
                #expect(sensors.SensorNames == ["Temperature", "Humidity", "Lights", last])
                #expect((25.0...27.0).contains(Double(sensors.SensorValues[0]) ?? 0))
                #expect((50.0...60.0).contains(Double(sensors.SensorValues[1]) ?? 0))
                #expect(sensors.SensorValues[0].count == 4, "three significant digits: \(sensors.SensorValues[0])")
                #expect(sensors.SensorValues[2] == "Off")
                let words = last == "Gas" ? ["Gas", "Okey"] : ["Detected", "Not-Detected"]
                #expect(words.contains(sensors.SensorValues[3]))
                #expect(sensors.SensorIcon == ["temperature", "humidity", sensors.SensorValues[2], sensors.SensorValues[3]])
                // The keys come in the original's order.
                #expect(reply.text.hasPrefix(#"{"SensorNames":"#))
            }
        }
        #expect(try await HTTP.get(port, "/rooms/1/kitchen").status == 200)
        #expect(try await HTTP.get(port, "/rooms/1/BALCONY").status == 200)
    }

    @Test func wrongCredentialsAndUnknownThings() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort

        for path in ["/login/Cemalettin/wrong", "/login/Nobody/12345", "/login/Mehmet/12345"] {
            let reply = try await HTTP.get(port, path)
            #expect(reply.status == 200)
            #expect(try JSONDecoder().decode(userModel.self, from: reply.body).userID == "0")
            #expect(reply.text == #"{"userID":"0"}"#)
        }
        for path in ["/rooms/3", "/rooms/1/Attic", "/rooms/3/Kitchen", "/nothing", "/rooms/1/Kitchen/extra", "/api"] {
            let reply = try await HTTP.get(port, path)
            #expect(reply.status == 404, "\(path)")
            #expect(reply.text == #"{"error":{"message":"Not found"}}"#)
        }
        let post = try await HTTP.send(port, "/rooms/1", method: "POST", body: Data("{}".utf8))
        #expect(post.status == 405)
        #expect(post.text == #"{"error":{"message":"Method not allowed"}}"#)
    }

    @Test func legacyRoutesAreOffByDefault() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker, settings: "source:\n  interval: 1\n")
        #expect(try await HTTP.get(bridge.httpPort, "/rooms/1").status == 404)
        #expect(try await HTTP.get(bridge.httpPort, "/login/Cemalettin/12345").status == 404)
        #expect(try await HTTP.get(bridge.httpPort, "/healthz").status == 200)
        #expect(!bridge.log.contains("legacy seed routes are on"))
    }

    @Test func malformedAndOversizedRequestsDoNotHarmTheServer() async throws {
        let broker = try await TestBroker()
        let bridge = try await BridgeProcess(broker: broker)
        let port = bridge.httpPort

        let garbage = RawHTTP.exchange(port: port, Array("GARBAGE\r\n\r\n".utf8))
        #expect(garbage.isEmpty || garbage.hasPrefix("HTTP/1.1 400"), "\(garbage.prefix(80))")

        let hugeHeader = "GET /rooms/1 HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 64 * 1024))\r\n\r\n"
        let headerReply = RawHTTP.exchange(port: port, Array(hugeHeader.utf8))
        #expect(headerReply.isEmpty || headerReply.range(of: #"^HTTP/1\.1 4\d\d"#, options: .regularExpression) != nil,
                "\(headerReply.prefix(80))")

        let hugeBody = "POST /rooms/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" + String(repeating: "b", count: 200_000)
        let bodyReply = RawHTTP.exchange(port: port, Array(hugeBody.utf8))
        #expect(bodyReply.isEmpty || bodyReply.hasPrefix("HTTP/1.1 413"), "\(bodyReply.prefix(80))")

        let binary = RawHTTP.exchange(port: port, (0..<512).map { UInt8($0 % 256) })
        #expect(!binary.hasPrefix("HTTP/1.1 200"))

        // Still serving, with the data intact.
        let after = try await HTTP.get(port, "/rooms/1/Kitchen")
        #expect(after.status == 200)
        #expect(try JSONDecoder().decode(sensorsModel.self, from: after.body).SensorNames.count == 4)
    }
}

/// Sends raw bytes over TCP and returns what comes back before the server closes or goes quiet.
enum RawHTTP {
    static func exchange(port: Int, _ bytes: [UInt8]) -> String {
        guard let fd = LoopbackPort.connect(port: port, configure: { fd in
            var timeout = timeval(tv_sec: 3, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }) else { return "" }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { break }  // the server may close early on a request it refuses
            offset += sent
        }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            reply += buffer[0..<count]
        }
        return String(decoding: reply, as: UTF8.self)
    }
}
