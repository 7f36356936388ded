import BridgeCore
import Foundation
import Testing

/// Guests' request parsing, their view of the user, and their tokens' marker (README, "Guests").
@Suite struct GuestDraftTests {
    let user = User(id: "1", username: "a", passwordHash: "", rooms: [
        Room(id: "kitchen", name: "Kitchen", sensors: [.lights]), Room(id: "garden", name: "Garden", sensors: [.lights]),
    ], groups: [LightGroup(name: "all", rooms: ["kitchen", "garden"])])
    let now = Date(timeIntervalSince1970: 1_900_000_000)

    func parse(_ text: String) -> Result<GuestDraft, APIBody.Problem> {
        GuestDraft.parse(Array(text.utf8), user: user, now: now)
    }

    @Test func aGoodRequestGivesRoomIdsAccessAndTheExpiryRoundedUp() throws {
        let draft = try parse(#"{"rooms":["Kitchen"],"access":"control","expires":"2030-03-17T17:46:40.5Z"}"#).get()
        #expect(draft == GuestDraft(rooms: ["kitchen"], access: .control, expiresAt: 1_900_000_001))
    }

    @Test func everyProblemIsNamedWithItsField() {
        guard case .failure(let problem) = parse(
            #"{"rooms":["kitchen","kitchen","bath"],"access":"all","expires":"2030-03-17T17:46:39Z","x":1}"#)
        else { Issue.record("accepted"); return }
        #expect(problem.message == #"field "x" is not known (expected rooms, access, expires); "#
            + #"field "rooms[1]": "kitchen" is named twice; field "rooms[2]": no room "bath"; "#
            + #"field "access" must be "read" or "control"; field "expires" must be in the future"#)
    }

    @Test func theExpiryIsAtMostThirtyDaysAway() {
        let limit = Date(timeIntervalSince1970: 1_900_000_000 + Double(Guest.maxLifetimeSeconds)).formatted(.iso8601)
        #expect((try? parse(#"{"rooms":["garden"],"access":"read","expires":"\#(limit)"}"#).get()) != nil)
        let beyond = Date(timeIntervalSince1970: 1_900_000_001 + Double(Guest.maxLifetimeSeconds)).formatted(.iso8601)
        #expect((try? parse(#"{"rooms":["garden"],"access":"read","expires":"\#(beyond)"}"#).get()) == nil)
    }

    @Test func aGuestSeesOnlyItsRoomsAndNoGroups() {
        let guest = Guest(id: String(repeating: "a", count: 32), userID: "1", rooms: ["garden"], access: .read,
                          expiresAt: 1)
        let view = guest.view(of: user)
        #expect(view.rooms.map(\.id) == ["garden"])
        #expect(view.groups.isEmpty)
        #expect(view.room(named: "Kitchen") == nil)
    }

    @Test func aGuestsTokenSaysSoAndReadsBack() throws {
        let claims = SessionClaims(id: Array(0..<16), userID: "1", expiresAt: 5, isGuest: true)
        #expect(claims.payload.first == SessionClaims.guestVersion)
        let back = try #require(SessionClaims(payload: claims.payload))
        #expect(back.isGuest)
        #expect(SessionClaims(payload: SessionClaims(id: Array(0..<16), userID: "1", expiresAt: 5).payload)?.isGuest == false)
    }

    @Test func eventsNameTheRoomTheyAreAbout() {
        #expect(BridgeEvent.gas(room: "kitchen", detected: true, at: now).room == "kitchen")
        #expect(BridgeEvent.alarm(uuid: "u", title: "t", firedAt: now).room == nil)
        #expect(BridgeEvent.relayed(type: "gas", json: "{}").room == nil)
    }
}
