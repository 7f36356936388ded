import Foundation
import Testing
@testable import BridgeCore

/// Each room's JSON, serialised once per change and shared by MQTT and HTTP.
@Suite struct RoomDocumentsTests {
    @Test func aDocumentIsTheSeedShapeAndFollowsEveryChange() throws {
        var home = Fixtures.home()
        let user = try #require(home.user(id: "1"))
        let kitchen = try #require(user.room(named: "Kitchen"))
        let documents = RoomDocuments()
        #expect(documents.document(kitchen, user: "1", in: home).bytes == SeedShapes.room(kitchen, user: "1", in: home).bytes)
        home.record(Reading(user: "1", room: "kitchen", sensor: .lights, value: .binary(true)), at: Date())
        let changed = documents.document(kitchen, user: "1", in: home).bytes
        #expect(changed == SeedShapes.room(kitchen, user: "1", in: home).bytes)
        #expect(String(decoding: changed, as: UTF8.self).contains(#""On""#))
        // An unchanged value leaves the revision, and so the document, as it was.
        let recordedAgain = home.record(Reading(user: "1", room: "kitchen", sensor: .lights, value: .binary(true)), at: Date())
        #expect(!recordedAgain)
        #expect(documents.document(kitchen, user: "1", in: home).bytes == changed)
        // While the room is unchanged every asker gets the one shared object, which the HTTP
        // server keeps its prepared answer beside (docs/performance.md, "Prepared responses").
        #expect(documents.document(kitchen, user: "1", in: home) === documents.document(kitchen, user: "1", in: home))
        #expect(documents.apiDocument(kitchen, user: "1", in: home) === documents.apiDocument(kitchen, user: "1", in: home))
        #expect(documents.roomsList(user) === documents.roomsList(user))
    }

    /// The API's variant: `"UpdatedAt"` spliced in as serialising it would put it, kept with the
    /// document and made again when the room's values change.
    @Test func theAPIDocumentIsSplicedAsSerialisingWouldAndFollowsEveryChange() throws {
        var home = Fixtures.home()
        let kitchen = try #require(home.user(id: "1")?.room(named: "Kitchen"))
        let documents = RoomDocuments()
        func serialised() -> [UInt8] {
            let updated = home.updatedAt(RoomKey(user: "1", room: "kitchen")).map { JSONValue.string(Timestamp.iso8601($0)) }
            return SeedShapes.room(kitchen, user: "1", in: home, extra: [("UpdatedAt", updated ?? .null)]).bytes
        }
        let before = documents.apiDocument(kitchen, user: "1", in: home).bytes
        #expect(before == serialised())
        #expect(String(decoding: before, as: UTF8.self).hasSuffix(#","UpdatedAt":"1970-01-01T00:00:00.000Z"}"#))
        #expect(documents.apiDocument(kitchen, user: "1", in: home).bytes == before)
        home.record(Reading(user: "1", room: "kitchen", sensor: .lights, value: .binary(true)),
                    at: Date(timeIntervalSince1970: 1_796_112_000))
        let changed = documents.apiDocument(kitchen, user: "1", in: home).bytes
        #expect(changed == serialised())
        #expect(String(decoding: changed, as: UTF8.self).contains(#""UpdatedAt":"2026-12-01T"#))
        // The seed document beside it is the same room without the member.
        #expect(documents.document(kitchen, user: "1", in: home).bytes == SeedShapes.room(kitchen, user: "1", in: home).bytes)
    }

    /// The list of a user's rooms: the seed shape, made again when the rooms change.
    @Test func theRoomsListFollowsTheLayout() throws {
        var home = Fixtures.home()
        let documents = RoomDocuments()
        var user = try #require(home.user(id: "1"))
        #expect(documents.roomsList(user).bytes == SeedShapes.rooms(user).bytes)
        #expect(documents.roomsList(user).bytes == SeedShapes.rooms(user).bytes)
        var users = home.users
        users[0].rooms[0].name = "Cellar"
        home.setUsers(users)
        user = try #require(home.user(id: "1"))
        let renamed = documents.roomsList(user).bytes
        #expect(renamed == SeedShapes.rooms(user).bytes)
        #expect(String(decoding: renamed, as: UTF8.self).contains(#""Cellar""#))
    }

    /// A room deleted and made again with its id starts again at revision 0: its old document is
    /// not served for it.
    @Test func aRoomMadeAgainWithItsIdGetsItsOwnDocument() throws {
        var home = Home(users: Fixtures.users)
        let documents = RoomDocuments()
        let kitchen = try #require(home.user(id: "1")?.room(named: "Kitchen"))
        let before = documents.document(kitchen, user: "1", in: home).bytes
        #expect(home.revision(of: RoomKey(user: "1", room: "kitchen")) == 0)
        var users = home.users
        users[0].rooms.removeAll { $0.id == "kitchen" }
        home.setUsers(users)
        let again = Room(id: "kitchen", name: "Kitchen", sensors: [.humidity])
        users[0].rooms.append(again)
        home.setUsers(users)
        #expect(home.revision(of: RoomKey(user: "1", room: "kitchen")) == 0)
        let after = documents.document(again, user: "1", in: home).bytes
        #expect(after != before)
        #expect(after == SeedShapes.room(again, user: "1", in: home).bytes)
        documents.forget([RoomKey(user: "1", room: "kitchen")])
        #expect(documents.document(again, user: "1", in: home).bytes == after)
    }
}
