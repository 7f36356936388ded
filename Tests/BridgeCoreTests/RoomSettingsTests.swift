import Foundation
import Testing
@testable import BridgeCore

/// `GET /api/v1/rooms?detail=1` (README, "Managing the home"): every room with its origin and its
/// sensors in the shapes a `POST`/`PUT` body takes, so a client can send them back edited.
@Suite struct RoomSettingsTests {
    @Test func apiRoomsShowTheirStoredSensorsAndFileRoomsTheirDecodedOnes() throws {
        let rules = RoomRulesTests.rules
        var user = RoomRulesTests.user
        user.rooms[0].bindings[.temperature] = BoundSensor(binding: .rtl433(model: "Acurite", id: "42", channel: nil, field: nil))
        let (row, room) = try rules.create(
            RoomRulesTests.body(#"{"name":"Office","sensors":["Temperature",{"name":"Lights","tasmota":{"topic":"office_lamp"}}]}"#),
            user: user, managed: []).get()
        user.rooms.append(room)
        guard case .array(let rooms) = RoomSettings.rooms(user, managed: [row]) else { Issue.record("not an array"); return }
        #expect(rooms.count == user.rooms.count)
        let fileRoom = user.rooms[0]
        let expectedFirst = fileRoom.sensors.map { sensor -> String in
            sensor == .temperature ? #"{"name":"Temperature","rtl_433":{"model":"Acurite","id":"42"}}"# : "\"\(sensor.displayName)\""
        }.joined(separator: ",")
        #expect(rooms[0].serialized == #"{"id":"\#(fileRoom.id)","name":"\#(fileRoom.name)","origin":"file","sensors":[\#(expectedFirst)]}"#)
        #expect(rooms.last?.serialized
            == #"{"id":"office","name":"Office","origin":"api","sensors":["Temperature",{"name":"Lights","tasmota":{"topic":"office_lamp"}}]}"#)
    }

    @Test func theAnswerDecodesBackIntoTheSameRoom() throws {
        let rules = RoomRulesTests.rules
        var user = RoomRulesTests.user
        let (row, room) = try rules.create(
            RoomRulesTests.body(#"{"name":"Shed","sensors":[{"name":"Temperature","zigbee2mqtt":{"device":"shed_sensor","field":"temperature"}},"Movement"]}"#),
            user: user, managed: []).get()
        user.rooms.append(room)
        guard case .array(let rooms) = RoomSettings.rooms(user, managed: [row]),
              case .object(let members)? = rooms.last,
              let sensors = members.first(where: { $0.0 == "sensors" })?.1
        else { Issue.record("no rooms"); return }
        user.rooms.removeLast()
        let body = RoomRulesTests.body(#"{"name":"Shed","sensors":\#(sensors.serialized)}"#)
        let (_, again) = try rules.create(body, user: user, managed: []).get()
        #expect(again == room)
    }
}
