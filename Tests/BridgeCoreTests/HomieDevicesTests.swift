import Foundation
import Testing
@testable import BridgeCore

/// Homie 5 devices from the home (README, "Homie"): ids, topics, the description, payloads.
@Suite struct HomieDevicesTests {
    let home = Fixtures.home()
    var devices: HomieDevices {
        HomieDevices(prefix: "homie", topics: Topics(base: "smarthome"), version: "0.1.0", users: home.users)
    }

    @Test func idsAreHomieIDs() {
        #expect(HomieDevices.id("smarthome-1") == "smarthome-1")
        #expect(HomieDevices.id("Flat/2_Home") == "flat-2-home")
        #expect(HomieDevices.id("_x__y_") == "x-y")
        #expect(HomieDevices.id("ü") == "x")
        #expect(devices.rootID == "smarthome-bridge")
        #expect(HomieDevices(prefix: "homie", topics: Topics(base: "smarthome"), version: "0", users: [], instance: 2)
            .rootID == "smarthome-bridge-2")
        #expect(HomieDevices.validatePrefix("homie") == nil)
        #expect(HomieDevices.validatePrefix("a/b") != nil)
        #expect(HomieDevices.validatePrefix("home/#") != nil)
    }

    @Test func aUsersHomeIsADeviceWithARoomNodeAndASensorProperty() throws {
        let user = home.users[0]
        let json = try #require(try JSONSerialization.jsonObject(with: Data(devices.description(of: user, home: home).bytes))
            as? [String: Any])
        #expect(json["homie"] as? String == "5.0")
        #expect(json["version"] is Int)
        #expect(json["name"] as? String == "Cemalettin home")
        #expect(json["root"] as? String == "smarthome-bridge")
        #expect(json["parent"] as? String == "smarthome-bridge")
        let nodes = try #require(json["nodes"] as? [String: [String: Any]])
        #expect(nodes.count == user.rooms.count)
        let kitchen = try #require(nodes["kitchen"]?["properties"] as? [String: [String: Any]])
        #expect(kitchen["temperature"]?["datatype"] as? String == "float")
        #expect(kitchen["temperature"]?["unit"] as? String == "°C")
        #expect(kitchen["humidity"]?["unit"] as? String == "%")
        #expect(kitchen["gas"]?["datatype"] as? String == "boolean")
        #expect(kitchen["gas"]?["settable"] == nil)
        #expect(kitchen["lights"]?["settable"] as? Bool == true)
        #expect(devices.descriptionTopic(device: devices.deviceID(of: user)) == "homie/5/smarthome-1/$description")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(devices.rootDescription(users: home.users).bytes))
            as? [String: Any])
        #expect(root["children"] as? [String] == ["smarthome-1", "smarthome-2"])
        #expect(root["root"] == nil)
    }

    @Test func theVersionChangesExactlyWhenTheDocumentDoes() throws {
        let user = home.users[0]
        let version = { (json: JSONValue) -> Int? in
            (try? JSONSerialization.jsonObject(with: Data(json.bytes)) as? [String: Any])?["version"] as? Int
        }
        #expect(version(devices.description(of: user, home: home)) == version(devices.description(of: user, home: home)))
        var renamed = user
        renamed.username = "Cemal"
        #expect(version(devices.description(of: user, home: home)) != version(devices.description(of: renamed, home: home)))
    }

    @Test func payloadsAndCommands() {
        #expect(HomieDevices.payload(.number(25.68)) == "25.7")
        #expect(HomieDevices.payload(.binary(true)) == "true")
        #expect(HomieDevices.payload(.binary(false)) == "false")
        #expect(HomieDevices.payload(.text("")) == "\u{0}")
        #expect(HomieDevices.command(Array("true".utf8)) == .success(.on))
        #expect(HomieDevices.command(Array("false".utf8)) == .success(.off))
        #expect(HomieDevices.command(Array("TRUE".utf8)).map { _ in true } != .success(true))
        #expect(devices.parseSet("homie/5/smarthome-1/kitchen/lights/set", in: home).map { ($0.user.id, $0.room.id) }! == ("1", "kitchen"))
        #expect(devices.parseSet("homie/5/smarthome-9/kitchen/lights/set", in: home) == nil)
        #expect(devices.parseSet("homie/5/smarthome-1/attic/lights/set", in: home) == nil)
        #expect(devices.parseSet("homie/5/smarthome-1/kitchen/gas/set", in: home) == nil)
        #expect(devices.propertyTopic(user: home.users[0], room: "kitchen", sensor: .temperature)
            == "homie/5/smarthome-1/kitchen/temperature")
    }
}
