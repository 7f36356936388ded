import Foundation
import Testing
@testable import BridgeCore

/// Rooms made through the API (README, "Managing the home"): the body through the config's decoder,
/// the API's own rules, loading kept rooms, and what a change of rooms does to the home.
@Suite struct RoomRulesTests {
    static let rules = RoomRules(configFile: "config/bridge.yaml",
                                 fileRooms: ["1": Set(Fixtures.users[0].rooms.map(\.id))],
                                 reservedTopicPrefixes: ["smarthome", "homeassistant"], zigbeeBase: "zigbee2mqtt")

    static func body(_ json: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] ?? [:]
    }

    static var user: User { Fixtures.users[0] }

    static func issues(_ result: Result<(ManagedRoom, Room), RoomChangeFailure>) -> [ConfigIssue] {
        if case .failure(.invalid(let issues)) = result { return issues }
        return []
    }

    @Test func aRoomIsDecodedLikeTheConfigFilesWithItsBinding() throws {
        let (row, room) = try Self.rules.create(
            Self.body(#"{"name":"Office","sensors":["Temperature",{"name":"Lights","tasmota":{"topic":"office_lamp"}}]}"#),
            user: Self.user, managed: []).get()
        #expect(room.id == "office")
        #expect(room.name == "Office")
        #expect(room.sensors == [.temperature, .lights])
        #expect(room.bindings[.lights]?.binding == .tasmota(topic: "office_lamp", sensor: nil, relay: nil))
        #expect(row == ManagedRoom(user: "1", id: "office", name: "Office",
                                   sensors: #"["Temperature",{"name":"Lights","tasmota":{"topic":"office_lamp"}}]"#))
        // Without sensors: the original's rule, stored as the names it gave.
        let (plain, _) = try Self.rules.create(Self.body(#"{"name":"Cellar"}"#), user: Self.user, managed: []).get()
        #expect(plain.sensors == #"["Temperature","Humidity","Lights","Movement"]"#)
    }

    @Test func everyProblemComesWithItsJSONPath() {
        let issues = Self.issues(Self.rules.create(
            Self.body(#"{"name":"Bad Room","colour":"red","sensors":["Temprature",{"name":"Lights","tasmota":{}},"Gas","Gas"]}"#),
            user: Self.user, managed: []))
        let paths = issues.map(\.path)
        #expect(paths.contains("colour"), "\(issues)")
        #expect(paths.contains("sensors[0]"), "\(issues)")
        #expect(paths.contains("sensors[1].tasmota.topic"), "\(issues)")
        #expect(paths.contains("sensors[3]"), "\(issues)")
        #expect(issues.first { $0.path == "sensors[0]" }?.message.contains("is not a known sensor") == true)
        // A name that is not a topic level, without an id, is named by its path.
        let spaced = Self.issues(Self.rules.create(Self.body(#"{"name":"Bad Room"}"#), user: Self.user, managed: []))
        #expect(spaced.map(\.path) == ["name"], "\(spaced)")
        let missing = Self.issues(Self.rules.create(Self.body(#"{"sensors":["Gas"]}"#), user: Self.user, managed: []))
        #expect(missing.map(\.path) == ["name"])
        #expect(missing.first?.message == "is required")
    }

    @Test func boundsAreChecked() {
        let many = (0..<(RoomRules.maxSensorsPerRoom + 1)).map { #"{"name":"S\#($0)","id":"s\#($0)","mqtt":{"topic":"d/\#($0)"}}"# }
        let tooMany = Self.issues(Self.rules.create(Self.body(#"{"name":"Lab","sensors":[\#(many.joined(separator: ","))]}"#),
                                                    user: Self.user, managed: []))
        #expect(tooMany.map(\.path) == ["sensors"])
        let rows = (0..<RoomRules.maxRoomsPerUser).map { ManagedRoom(user: "1", id: "r\($0)", name: "R\($0)", sensors: "[]") }
        guard case .failure(.conflict(let message)) = Self.rules.create(Self.body(#"{"name":"One"}"#), user: Self.user,
                                                                        managed: rows) else {
            Issue.record("the room limit is not checked")
            return
        }
        #expect(message.contains("at most \(RoomRules.maxRoomsPerUser) rooms"))
        let long = String(repeating: "a", count: RoomRules.maxNameBytes + 1)
        #expect(Self.issues(Self.rules.create(Self.body(#"{"name":"\#(long)","id":"long"}"#), user: Self.user, managed: []))
            .map(\.path) == ["name"])
    }

    @Test func theConfigFilesRoomsAndTakenIdsAreConflicts() {
        guard case .failure(.conflict(let taken)) = Self.rules.create(Self.body(#"{"name":"Kitchen"}"#), user: Self.user,
                                                                      managed: []) else {
            Issue.record("a taken id was accepted")
            return
        }
        #expect(taken.contains("config/bridge.yaml"))
        guard case .failure(.conflict(let file)) = Self.rules.update(room: "Kitchen", Self.body(#"{"name":"Cook"}"#),
                                                                     user: Self.user, managed: []) else {
            Issue.record("a config room was changed")
            return
        }
        #expect(file.contains("defined in config/bridge.yaml"))
        #expect(Self.rules.delete(room: "nowhere", user: Self.user, managed: []) == .failure(.notFound))
        // Another id, but a name the user has: routes find rooms by name too.
        guard case .failure(.conflict(let named)) = Self.rules.create(Self.body(#"{"name":"kitchen","id":"cook"}"#),
                                                                      user: Self.user, managed: []) else {
            Issue.record("a taken name was accepted")
            return
        }
        #expect(named.contains("the name \"kitchen\" is taken by the room \"Kitchen\""))
        var clustered = Self.rules
        clustered.clustered = true
        guard case .failure(.conflict) = clustered.create(Self.body(#"{"name":"Office"}"#), user: Self.user, managed: [])
        else { Issue.record("a cluster took a room"); return }
    }

    @Test func anUpdateKeepsTheIdAndWhatItLeavesOut() throws {
        let (row, room) = try Self.rules.create(Self.body(#"{"name":"Office","sensors":["Temperature","Lights"]}"#),
                                                user: Self.user, managed: []).get()
        var user = Self.user
        user.rooms.append(room)
        let (renamed, study) = try Self.rules.update(room: "office", Self.body(#"{"name":"Study"}"#), user: user,
                                                     managed: [row]).get()
        #expect(study.id == "office")
        #expect(study.name == "Study")
        #expect(study.sensors == [.temperature, .lights], "sensors left out stay")
        #expect(renamed.sensors == row.sensors)
        let idChange = Self.issues(Self.rules.update(room: "office", Self.body(#"{"id":"study"}"#), user: user, managed: [row]))
        #expect(idChange.map(\.path) == ["id"])
        // sensor/bind: the entry of the same sensor is replaced, another one is added.
        let (_, bound) = try Self.rules.bind(room: "office", sensor: Self.body(#"{"name":"Lights","tasmota":{"topic":"lamp"}}"#),
                                             user: user, managed: [row]).get()
        #expect(bound.sensors == [.temperature, .lights])
        #expect(bound.bindings[.lights]?.binding == .tasmota(topic: "lamp", sensor: nil, relay: nil))
        let (_, more) = try Self.rules.bind(room: "office", sensor: "Gas", user: user, managed: [row]).get()
        #expect(more.sensors == [.temperature, .lights, .gas])
    }

    @Test func onlyAdminsBindHTTPDevicesOrTheBridgesOwnTopics() throws {
        let http = #"{"name":"Lab","sensors":[{"name":"Temperature","http":{"url":"http://10.0.0.1/x","value":"/t"}}]}"#
        #expect(Self.issues(Self.rules.create(Self.body(http), user: Self.user, managed: [])).map(\.path) == ["sensors[0].http"])
        let spy = #"{"name":"Spy","sensors":[{"name":"Temperature","mqtt":{"topic":"smarthome/2/kitchen/temperature"}}]}"#
        let spied = Self.issues(Self.rules.create(Self.body(spy), user: Self.user, managed: []))
        #expect(spied.map(\.path) == ["sensors[0].mqtt"])
        let everything = ##"{"name":"All","sensors":[{"name":"Temperature","mqtt":{"topic":"#"}}]}"##
        #expect(Self.issues(Self.rules.create(Self.body(everything), user: Self.user, managed: [])).isEmpty == false, "a filter on everything is refused")
        var admin = Self.user
        admin.isAdmin = true
        _ = try Self.rules.create(Self.body(spy), user: admin, managed: []).get()
        _ = try Self.rules.create(Self.body(http), user: admin, managed: []).get()
        #expect(RoomRules.filter("+/2/kitchen", reachesUnder: "smarthome"))
        #expect(!RoomRules.filter("smarthome", reachesUnder: "smarthome"))
        #expect(!RoomRules.filter("tele/lamp/SENSOR", reachesUnder: "smarthome"))
        #expect(RoomRules.filter("homeassistant/#", reachesUnder: "homeassistant"))
    }

    @Test func keptRoomsJoinTheFilesAndThoseThatNoLongerFitAreLeftOut() {
        let rows = [
            ManagedRoom(user: "1", id: "office", name: "Office", sensors: #"["Temperature"]"#),
            ManagedRoom(user: "1", id: "kitchen", name: "Kitchen", sensors: #"["Gas"]"#),
            ManagedRoom(user: "9", id: "shed", name: "Shed", sensors: #"["Gas"]"#),
            ManagedRoom(user: "2", id: "odd", name: "Odd", sensors: #"["Nope"]"#),
        ]
        let (users, skipped) = Self.rules.merge(Fixtures.users, rows: rows)
        #expect(users[0].rooms.last == Room(id: "office", name: "Office", sensors: [.temperature]))
        #expect(users[0].rooms.count == Fixtures.users[0].rooms.count + 1)
        #expect(users[1].rooms.count == Fixtures.users[1].rooms.count)
        #expect(skipped.map(\.0.id) == ["kitchen", "shed", "odd"])
        #expect(skipped[2].1.contains("sensors[0]"))
    }

    @Test func aChangeOfRoomsKeepsTheValuesOfRoomsThatStay() {
        var home = Fixtures.home()
        let key = RoomKey(user: "1", room: "kitchen")
        let before = home.values(in: key)
        let revision = home.revision(of: key)
        var users = Fixtures.users
        users[0].rooms.removeAll { $0.id == "garden" }
        users[0].rooms[users[0].rooms.firstIndex { $0.id == "kitchen" }!].name = "Cookery"
        users[0].rooms.append(Room(id: "office", name: "Office", sensors: [.temperature]))
        let diff = LayoutDiff(old: home.users, new: users)
        #expect(diff.added.map(\.room.id) == ["office"])
        #expect(diff.removed.map(\.room.id) == ["garden"])
        #expect(diff.changed.map(\.new.name) == ["Cookery"])
        #expect(!diff.bindingsChanged)
        home.setUsers(users)
        #expect(home.values(in: key) == before)
        #expect(home.revision(of: key) > revision, "a renamed room's document is made again")
        #expect(home.values(in: RoomKey(user: "1", room: "garden")).isEmpty)
        #expect(home.user(id: "1")?.room(named: "Cookery")?.id == "kitchen")
    }

    @Test func theSimulatorTakesNewRoomsAndKeepsTheOthers() {
        var simulator = Simulator(users: Fixtures.users, seed: 7)
        var users = Fixtures.users
        users[0].rooms.append(Room(id: "office", name: "Office", sensors: [.temperature, .lights]))
        let first = simulator.reshape(users: users)
        #expect(first.map(\.room) == ["office", "office"])
        #expect(first.contains { reading in
            guard case .number(let value) = reading.value else { return false }
            return reading.sensor == .temperature && Simulator.temperatureRange.contains(value)
        })
        let step = simulator.step()
        #expect(step.contains { $0.room == "office" && $0.sensor == .temperature })
        #expect(!step.contains { $0.room == "office" && $0.sensor == .lights })
    }

    @Test func jsonBecomesConfigNodesAndBack() {
        let node = ConfigNode.fromJSON(Self.body(#"{"b":true,"n":411042499,"s":"5","x":null,"l":[1.5]}"#))
        #expect(node == .mapping([(key: "b", value: .scalar("true", isQuoted: false, line: 0)),
                                  (key: "l", value: .sequence([.scalar("1.5", isQuoted: false, line: 0)], line: 0)),
                                  (key: "n", value: .scalar("411042499", isQuoted: false, line: 0)),
                                  (key: "s", value: .scalar("5", isQuoted: true, line: 0)),
                                  (key: "x", value: .null(line: 0))], line: 0))
        #expect(node.json.serialized == #"{"b":true,"l":[1.5],"n":411042499,"s":"5","x":null}"#)
    }
}
