import BridgeCore
import Testing
@testable import BridgeRuntime

/// What the device source subscribes with an admin configured (README, "Admins and unbound
/// devices") when rooms change while running (README, "Managing the home").
@Suite struct DeviceSubscriptionTests {
    let discovery = UnboundDevices.filters(zigbeeBase: "zigbee2mqtt")

    @Test func aBoundTopicThePresetsFiltersCoverIsNotSubscribedTwice() {
        let filters = DeviceSource.subscribed(["zigbee2mqtt/bed_climate", "tele/plug/SENSOR", "attic/temperature",
                                               "rtl_433/+/events"], discovery: discovery)
        #expect(filters == ["attic/temperature", "rtl_433/+/events", "zigbee2mqtt/+", "tele/+/SENSOR", "tele/+/STATE"])
        #expect(DeviceSource.subscribed(["zigbee2mqtt/bed_climate"], discovery: []) == ["zigbee2mqtt/bed_climate"],
                "without an admin only the bound topics")
    }

    @Test func aRebindNeverUnsubscribesThePresetsFilters() {
        // The only rtl_433 sensor goes, and a zigbee2mqtt device is bound: nothing of the presets' changes.
        let gone = DeviceSource.resubscription(from: ["rtl_433/+/events", "attic/temperature"],
                                               to: ["zigbee2mqtt/new_sensor"], discovery: discovery)
        #expect(gone.subscribe == [])
        #expect(gone.unsubscribe == ["attic/temperature"])
        // Without an admin, the same change takes the filter away.
        let plain = DeviceSource.resubscription(from: ["rtl_433/+/events"], to: ["zigbee2mqtt/new_sensor"], discovery: [])
        #expect(plain.subscribe == ["zigbee2mqtt/new_sensor"])
        #expect(plain.unsubscribe == ["rtl_433/+/events"])
    }
}
