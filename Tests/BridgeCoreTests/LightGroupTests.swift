import Testing
@testable import BridgeCore

/// Groups (README, "Groups"): decoded and validated with the users, their topics, their state.
@Suite struct LightGroupTests {
    static func user(groups: [Any]) -> [KeyValuePairs<String, Any>] {
        [["id": "1", "username": "a", "password_hash": "$argon2id$x",
          "rooms": ["Kitchen", "Livingroom", ["name": "Attic", "sensors": ["Temperature"]] as KeyValuePairs<String, Any>],
          "groups": groups]]
    }

    func load(groups: [Any]) -> Result<BridgeConfiguration, ConfigIssues> {
        ConfigLoader.load(Fixtures.node(["users": Self.user(groups: groups)] as KeyValuePairs<String, Any>), environment: [:])
    }

    @Test func groupsAreDecodedWithTheirRoomIDs() throws {
        let configuration = try load(groups: [
            ["name": "downstairs", "rooms": ["Kitchen", "livingroom"]] as KeyValuePairs<String, Any>,
            ["name": "cooking", "rooms": ["KITCHEN"]] as KeyValuePairs<String, Any>,
        ]).get()
        let user = try #require(configuration.users.first)
        #expect(user.groups == [LightGroup(name: "downstairs", rooms: ["kitchen", "livingroom"]),
                                LightGroup(name: "cooking", rooms: ["kitchen"])])
        #expect(user.group(named: "cooking")?.rooms == ["kitchen"])
        #expect(user.group(named: "Cooking") == nil)
    }

    @Test func everyBadGroupIsNamedByItsPath() {
        guard case .failure(let problems) = load(groups: [
            ["name": "Down Stairs", "rooms": ["Kitchen"]] as KeyValuePairs<String, Any>,
            ["name": "up", "rooms": ["Cellar", "Attic", "Kitchen", "kitchen"]] as KeyValuePairs<String, Any>,
            ["name": "up", "rooms": [String]()] as KeyValuePairs<String, Any>,
            ["name": "x", "rooms": ["Kitchen"], "colour": "red"] as KeyValuePairs<String, Any>,
        ]) else {
            Issue.record("bad groups were accepted")
            return
        }
        let byPath = Dictionary(problems.issues.map { ($0.path, $0.message) }, uniquingKeysWith: { a, _ in a })
        #expect(Set(byPath.keys) == ["users[0].groups[0].name", "users[0].groups[1].rooms[0]",
                                     "users[0].groups[1].rooms[1]", "users[0].groups[1].rooms[3]",
                                     "users[0].groups[2].name", "users[0].groups[2].rooms",
                                     "users[0].groups[3].colour"], "\(problems.issues.map(\.description))")
        #expect(byPath["users[0].groups[1].rooms[0]"]?.contains("\"Cellar\" is not a room of this user") == true)
        #expect(byPath["users[0].groups[1].rooms[1]"] == "\"Attic\" has no lights")
        #expect(byPath["users[0].groups[1].rooms[3]"] == "\"kitchen\" is listed twice")
        #expect(byPath["users[0].groups[2].name"] == "\"up\" is used by another group of this user")
    }

    @Test func tooManyGroupsAreRefused() {
        let many: [Any] = (0...UsersDecoder.maxGroups).map {
            ["name": "g\($0)", "rooms": ["Kitchen"]] as KeyValuePairs<String, Any>
        }
        guard case .failure(let problems) = load(groups: many) else {
            Issue.record("\(many.count) groups were accepted")
            return
        }
        #expect(problems.issues.map(\.path) == ["users[0].groups"])
    }

    @Test func roomsNamedLikeTheUsersOwnTopicsAreRefused() {
        let found = ConfigLoader.load(Fixtures.node(["users": [
            ["id": "1", "username": "a", "password_hash": "$argon2id$x", "rooms": ["Lights", "Groups"]]
                as KeyValuePairs<String, Any>,
        ]] as KeyValuePairs<String, Any>), environment: [:])
        guard case .failure(let problems) = found else {
            Issue.record("rooms lights and groups were accepted")
            return
        }
        #expect(Set(problems.issues.map(\.path)) == ["users[0].rooms[0].name", "users[0].rooms[1].name"])
    }

    @Test func groupTopicsAreParsedAndRoomTopicsAreNot() {
        let topics = Topics(base: "smarthome")
        #expect(topics.parseGroupCommandTopic("smarthome/1/lights/set")! == ("1", nil))
        #expect(topics.parseGroupCommandTopic("smarthome/1/groups/downstairs/set")! == ("1", "downstairs"))
        #expect(topics.parseGroupCommandTopic("smarthome/1/kitchen/lights/set") == nil)
        #expect(topics.parseGroupCommandTopic("smarthome/1/groups//set") == nil)
        #expect(topics.parseGroupCommandTopic("smarthome/bridge/lights/set") == nil)
        #expect(topics.parseGroupCommandTopic("other/1/lights/set") == nil)
        #expect(topics.groupSet(user: "1", group: "downstairs") == "smarthome/1/groups/downstairs/set")
        #expect(topics.group(user: "1", group: "downstairs") == "smarthome/1/groups/downstairs")
        #expect(topics.userLights(user: "1") == "smarthome/1/lights")
    }

    @Test func aGroupIsOnOnlyWhenAllItsLightsAre() throws {
        let user = User(id: "1", username: "a", passwordHash: "x", rooms: [
            Room(id: "kitchen", name: "Kitchen", sensors: [.lights]),
            Room(id: "hall", name: "Hall", sensors: [.lights]),
            Room(id: "attic", name: "Attic", sensors: [.temperature]),
        ], groups: [LightGroup(name: "down", rooms: ["kitchen"])])
        var home = Home(users: [user])
        let (_, every) = try home.groupTarget(user: "1", group: nil).get()
        #expect(every.map(\.id) == ["kitchen", "hall"])
        #expect(try home.groupTarget(user: "1", group: "down").get().1.map(\.id) == ["kitchen"])
        #expect(throws: CommandRejection.unknownGroup(user: "1", group: "up")) { try home.groupTarget(user: "1", group: "up").get() }
        #expect(!home.allLightsOn(user: "1", rooms: every))
        home.record(Reading(user: "1", room: "kitchen", sensor: .lights, value: .binary(true)), at: .now)
        #expect(!home.allLightsOn(user: "1", rooms: every))
        #expect(home.allLightsOn(user: "1", rooms: [every[0]]))
        home.record(Reading(user: "1", room: "hall", sensor: .lights, value: .binary(true)), at: .now)
        #expect(home.allLightsOn(user: "1", rooms: every))
    }
}
