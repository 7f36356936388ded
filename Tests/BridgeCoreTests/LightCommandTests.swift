import Foundation
import Testing
@testable import BridgeCore

@Suite struct LightCommandTests {
    @Test(arguments: [
        ("ON", LightCommand.on), ("on", .on), ("On", .on), ("OFF", .off), ("off", .off), ("TOGGLE", .toggle),
        ("toggle", .toggle), ("ToGgLe", .toggle), (" ON\n", .on), (#"{"state":"ON"}"#, .on),
        (#"{"state":"off"}"#, .off), (#" {"state": "Toggle", "brightness": 3} "#, .toggle),
    ])
    func acceptsValidCommands(payload: String, expected: LightCommand) throws {
        #expect(try LightCommand.parse(Array(payload.utf8)).get() == expected)
    }

    @Test(arguments: [
        ("", "empty payload"),
        ("bogus", "unknown command \"bogus\""),
        ("ONN", "unknown command"),
        ("1", "unknown command"),
        ("{", "not valid JSON"),
        ("[\"ON\"]", "unknown command"),
        (#"{"State":"ON"}"#, "no \"state\" field"),
        (#"{"state":1}"#, "must be a string"),
        (#"{"state":null}"#, "must be a string"),
        (#"{"state":"DIM"}"#, "\"DIM\"; expected ON, OFF or TOGGLE"),
        (#"{"state":"ON"} trailing"#, "not valid JSON"),
        (String(repeating: "O", count: 300), "longer than 256"),
    ])
    func rejectsInvalidCommandsWithAReason(payload: String, reason: String) {
        switch LightCommand.parse(Array(payload.utf8)) {
        case .success(let command):
            Issue.record("\(payload) parsed as \(command)")
        case .failure(let rejection):
            #expect(rejection.code == "bad_payload")
            #expect(rejection.description.contains(reason), "\(rejection.description)")
        }
    }

    @Test func rejectsInvalidUTF8() {
        guard case .failure(let rejection) = LightCommand.parse([0x4F, 0xFF, 0x4E]) else {
            Issue.record("invalid UTF-8 accepted")
            return
        }
        #expect(rejection.description.contains("UTF-8"))
    }

    @Test func quotedExcerptsStayShortAndPrintable() {
        let text = LightCommand.quoted(String(repeating: "x", count: 100) + "\u{7}")
        #expect(text.count < 50)
        #expect(!text.contains("\u{7}"))
    }

    @Test func togglingFlips() {
        #expect(LightCommand.toggle.applied(to: false))
        #expect(!LightCommand.toggle.applied(to: true))
        #expect(LightCommand.on.applied(to: true))
        #expect(!LightCommand.off.applied(to: true))
    }

    @Test func homeAppliesCommandsToKnownLightsOnly() throws {
        var home = Fixtures.home()
        let time = Date()
        let reading = try home.apply(.toggle, user: "1", room: "kitchen", at: time).get()
        #expect(reading.value == .binary(true))
        #expect(home.value(of: .lights, in: RoomKey(user: "1", room: "kitchen")) == .binary(true))
        #expect(try home.apply(.toggle, user: "1", room: "Kitchen", at: time).get().value == .binary(false))
        #expect(try home.apply(.on, user: "2", room: "garden", at: time).get().value == .binary(true))
        // The other user's garden is untouched.
        #expect(home.value(of: .lights, in: RoomKey(user: "1", room: "garden")) == .binary(false))

        #expect(home.apply(.on, user: "9", room: "kitchen", at: time) == .failure(.unknownUser("9")))
        #expect(home.apply(.on, user: "1", room: "attic", at: time) == .failure(.unknownRoom(user: "1", room: "attic")))
        #expect(home.commandTarget(user: "1", room: "kitchen", sensor: "temperature").map { _ in true }
            == .failure(.notALight(sensor: "temperature")))
    }

    @Test func roomsWithoutLightsRejectCommands() {
        var home = Home(users: [User(id: "1", username: "u", passwordHash: "h",
                                     rooms: [Room(id: "cellar", name: "Cellar", sensors: [.temperature])])])
        #expect(home.apply(.on, user: "1", room: "cellar", at: Date()) == .failure(.noLights(room: "cellar")))
    }
}

@Suite struct LightCommandASCIITests {
    @Test func onlyASCIICaseIsFolded() {
        #expect(LightCommand(word: "oFf") == .off)
        #expect(LightCommand(word: "o\u{FB00}") == nil, "the ligature ﬀ upper-cases to FF")
        guard case .failure = LightCommand.parse(Array("o\u{FB00}".utf8)) else {
            Issue.record("a ligature spelled OFF")
            return
        }
        guard case .failure = APIBody.lights(Array("{\"state\":\"o\u{FB00}\"}".utf8)) else {
            Issue.record("a ligature spelled OFF in JSON")
            return
        }
    }
}
