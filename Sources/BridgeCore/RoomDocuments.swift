import Synchronization

/// Each room's JSON in the seed shape (README, "HTTP"), serialised once per change of the room and
/// reused by everyone who sends it: the MQTT room topic, the seed route and the API. A document
/// is checked against the room's revision in the home it is asked for and against the room itself
/// (a room deleted and made again with its id starts again at revision 0), so it is never stale; at
/// most one per room is kept, and a room that went is forgotten (`forget`).
public final class RoomDocuments: Sendable {
    /// Immutable and shared, so that a request takes one reference under the lock, not a copy of the
    /// room (docs/performance.md, "The HTTP cost, profiled").
    private final class Document: Sendable {
        let revision: Int
        let room: Room
        let bytes: SharedBody
        /// The API's variant (`apiDocument`), made when first asked for.
        let api: SharedBody?

        init(revision: Int, room: Room, bytes: SharedBody, api: SharedBody? = nil) {
            self.revision = revision
            self.room = room
            self.bytes = bytes
            self.api = api
        }
    }

    private let documents = Mutex<[RoomKey: Document]>([:])

    /// A user's list of rooms (`/rooms/<user>`), checked against the rooms it was made from: the same
    /// array unless the layout changed, which `==` sees from the array's identity alone.
    private final class List: Sendable {
        let rooms: [Room]
        let bytes: SharedBody

        init(rooms: [Room], bytes: SharedBody) {
            self.rooms = rooms
            self.bytes = bytes
        }
    }

    private let lists = Mutex<[String: List]>([:])
    /// Lists kept at most (one per user asked for); past it they are all made again.
    static let listCapacity = 10_000

    public init() {}

    /// The room's document as `home` has it.
    public func document(_ room: Room, user: String, in home: Home) -> SharedBody {
        let key = RoomKey(user: user, room: room.id)
        let revision = home.revision(of: key)
        if let cached = documents.withLock({ $0[key] }), cached.revision == revision, cached.room == room {
            return cached.bytes
        }
        let bytes = SharedBody(SeedShapes.room(room, user: user, in: home).bytes)
        documents.withLock { documents in
            // A newer revision stored meanwhile by another thread stays.
            if let stored = documents[key], stored.room == room, stored.revision >= revision { return }
            documents[key] = Document(revision: revision, room: room, bytes: bytes)
        }
        return bytes
    }

    /// The API's room (README, "The authenticated API (v1)"): the seed document with `"UpdatedAt"`
    /// after the seed keys, spliced in before its closing brace rather than serialised again, and kept
    /// beside it: the time changes only with the room's values, which give it a new revision.
    public func apiDocument(_ room: Room, user: String, in home: Home) -> SharedBody {
        let key = RoomKey(user: user, room: room.id)
        let revision = home.revision(of: key)
        if let cached = documents.withLock({ $0[key] }), cached.revision == revision, cached.room == room,
           let api = cached.api {
            return api
        }
        let seed = document(room, user: user, in: home)
        var bytes = seed.bytes
        if bytes.last == UInt8(ascii: "}") {
            let updated = home.updatedAt(key).map { JSONValue.string(Timestamp.iso8601($0)) } ?? .null
            bytes.removeLast()
            bytes.append(UInt8(ascii: ","))
            bytes.append(contentsOf: JSONValue.object([("UpdatedAt", updated)]).bytes.dropFirst())
        }
        let api = SharedBody(bytes)
        documents.withLock { documents in
            guard let stored = documents[key], stored.revision == revision, stored.room == room else { return }
            documents[key] = Document(revision: revision, room: room, bytes: stored.bytes, api: api)
        }
        return api
    }

    /// The user's rooms in the seed shape (`SeedShapes.rooms`).
    public func roomsList(_ user: User) -> SharedBody {
        if let cached = lists.withLock({ $0[user.id] }), cached.rooms == user.rooms { return cached.bytes }
        let bytes = SharedBody(SeedShapes.rooms(user).bytes)
        lists.withLock { lists in
            if lists.count >= Self.listCapacity { lists.removeAll(keepingCapacity: true) }
            lists[user.id] = List(rooms: user.rooms, bytes: bytes)
        }
        return bytes
    }

    /// Rooms that went (README, "Managing the home"): their documents, and their users' lists, are
    /// dropped, so rooms made and deleted while running don't pile up.
    public func forget(_ keys: [RoomKey]) {
        documents.withLock { documents in
            for key in keys { documents[key] = nil }
        }
        lists.withLock { lists in
            for key in keys { lists[key.user] = nil }
        }
    }
}
