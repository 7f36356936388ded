import BridgeCore
import Foundation
import Testing
@testable import BridgeRuntime

/// Rooms that change while running (README, "Managing the home"): what the state publisher sends,
/// and which settings a reload names as needing a restart.
@Suite struct LayoutChangeTests {
    @Test func aRemovedRoomIsClearedAndANewOneAnnounced() {
        let bridge = RuntimeFixture()
        let old = bridge.store.home
        var users = old.users
        users[0].rooms.removeAll { $0.id == "garden" }
        users[0].rooms.append(Room(id: "office", name: "Office", sensors: [.temperature]))
        bridge.store.withLock { state in
            state.home.setUsers(users)
            state.home.record(Reading(user: "1", room: "office", sensor: .temperature, value: .number(21)), at: Date())
        }
        _ = bridge.broker.take()
        let sent = bridge.publisher.announce(LayoutDiff(old: old.users, new: users), old: old)
        let messages = bridge.broker.take()
        #expect(sent == messages.count)
        let cleared = messages.filter { $0.payload.isEmpty }.map(\.topic)
        #expect(cleared == ["smarthome/1/garden/temperature", "smarthome/1/garden", "smarthome/1/garden/availability"])
        #expect(messages.allSatisfy { $0.retain })
        let published = messages.filter { !$0.payload.isEmpty }.map(\.topic)
        #expect(published == ["smarthome/1/office/temperature", "smarthome/1/office", "smarthome/1/office/availability",
                              "smarthome/bridge/info"])
        #expect(messages.first { $0.topic == "smarthome/1/office/temperature" }?.payload == SensorValue.number(21).mqttPayload)
    }

    @Test func onlySettingsOutsideUsersAndNotifyNeedARestart() {
        let bridge = RuntimeFixture()
        var changed = bridge.configuration
        #expect(ConfigReloader.settingsNeedingRestart(bridge.configuration, changed).isEmpty)
        changed.users[0].rooms.removeAll()
        changed.users[0].passwordHash = "z"
        #expect(ConfigReloader.settingsNeedingRestart(bridge.configuration, changed).isEmpty)
        changed.http.port = 9999
        changed.mqtt.keepalive = 7
        changed.users[1].notify = [.ntfy(url: "http://127.0.0.1:1", topic: "t", token: nil)]
        #expect(ConfigReloader.settingsNeedingRestart(bridge.configuration, changed) == ["mqtt", "http", "users[].notify"])
    }
}
