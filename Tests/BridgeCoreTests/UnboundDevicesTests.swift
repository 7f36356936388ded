import BridgeCore
import Foundation
import Testing

/// Which device a message on a preset's topic comes from, and the bounded list of them.
@Suite struct UnboundDevicesTests {
    func identify(_ topic: String, _ payload: String = "{}", base: String = "zigbee2mqtt") -> String? {
        UnboundDevices.identify(topic: topic, payload: Array(payload.utf8), zigbeeBase: base)?.binding.serialized
    }

    @Test func eachPresetsDeviceIsNamedAsItsBindingWouldBe() {
        #expect(identify("zigbee2mqtt/hall_motion") == #"{"zigbee2mqtt":{"device":"hall_motion"}}"#)
        #expect(identify("z2m/home/plug", base: "z2m/home") == #"{"zigbee2mqtt":{"device":"plug"}}"#)
        #expect(identify("zigbee2mqtt/bridge") == nil, "zigbee2mqtt's own topic")
        #expect(identify("tele/plug/SENSOR") == #"{"tasmota":{"topic":"plug"}}"#)
        #expect(identify("rtl_433/host/events", #"{"model":"Acurite-Tower","id":1234,"channel":"A"}"#)
            == #"{"rtl_433":{"model":"Acurite-Tower","id":"1234","channel":"A"}}"#)
        #expect(identify("rtl_433/host/events", #"{"model":"Acurite-Tower"}"#) == nil, "no id")
        #expect(identify("rtl_433/host/events", "not json") == nil)
    }

    @Test func theListIsBoundedTheOldestGoFirstAndPayloadsAreCut() {
        var list = UnboundDevices(capacity: 3)
        for index in 0..<5 {
            list.saw(topic: "zigbee2mqtt/d\(index)", payload: Array("{}".utf8), zigbeeBase: "zigbee2mqtt",
                     at: Date(timeIntervalSince1970: Double(index)))
        }
        #expect(list.list.map(\.topic) == ["zigbee2mqtt/d4", "zigbee2mqtt/d3", "zigbee2mqtt/d2"])
        // Heard again: updated in place, nothing evicted.
        list.saw(topic: "zigbee2mqtt/d2", payload: Array(String(repeating: "ü", count: 600).utf8), zigbeeBase: "zigbee2mqtt",
                 at: Date(timeIntervalSince1970: 9))
        #expect(list.count == 3)
        #expect(list.list.first?.topic == "zigbee2mqtt/d2")
        #expect(list.list.first?.payload == String(repeating: "ü", count: 512))
        list.saw(topic: "elsewhere/x", payload: [], zigbeeBase: "zigbee2mqtt", at: Date())
        #expect(list.count == 3)
    }

    @Test func devicesABindingNowClaimsAreForgotten() {
        var list = UnboundDevices()
        list.saw(topic: "zigbee2mqtt/porch", payload: Array("{}".utf8), zigbeeBase: "zigbee2mqtt", at: Date())
        list.saw(topic: "rtl_433/host/events", payload: Array(#"{"model":"Acurite-Tower","id":7,"channel":"A"}"#.utf8),
                 zigbeeBase: "zigbee2mqtt", at: Date())
        #expect(list.list.compactMap(\.rtl433) == [RTL433Sensor(model: "Acurite-Tower", id: "7", channel: "A")])
        list.forget { $0.key == "zigbee2mqtt porch" }
        #expect(list.list.map(\.topic) == ["rtl_433/host/events"])
        list.forget { $0.rtl433?.id == "7" }
        #expect(list.count == 0)
    }
}
