import Synchronization

/// Each room's JSON in the seed shape (README, "HTTP"), serialised once per change of the room and
/// reused by everyone who sends it: the MQTT room topic, the seed route and the API. A document is
/// kept in the room's revision in the home it is asked for (`RoomRevision`), which every change of
/// the room replaces, so it is never stale and goes with the revision. The room asked for must be the
/// one `home` has under its id (every caller finds it in that home): a revision is one room's.
public final class RoomDocuments: Sendable {
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
        func make() -> SharedBody { SharedBody(SeedShapes.room(room, user: user, in: home).bytes) }
        return Self.kept(in: home.currentRevision(of: RoomKey(user: user, room: room.id))?.seed, for: room, in: home,
                         user: user, make: make)
    }

    /// The document of the room `home.room(ofUser:named:)` finds (nil: none), read where the home keeps
    /// it: the room route's, on every request.
    public func document(ofUser user: String, named name: String, in home: Home) -> SharedBody? {
        home.withRoom(ofUser: user, named: name) { room in
            home.currentRevision(of: RoomKey(user: user, room: room.id))?.seed.current() ?? document(room, user: user, in: home)
        }
    }

    /// The API's room (README, "The authenticated API (v1)"): the seed document with `"UpdatedAt"`
    /// after the seed keys, spliced in before its closing brace rather than serialised again, and kept
    /// beside it: the time changes only with the room's values, which give it a new revision.
    public func apiDocument(_ room: Room, user: String, in home: Home) -> SharedBody {
        let key = RoomKey(user: user, room: room.id)
        func make() -> SharedBody {
            var bytes = document(room, user: user, in: home).bytes
            if bytes.last == UInt8(ascii: "}") {
                let updated = home.updatedAt(key).map { JSONValue.string(Timestamp.iso8601($0)) } ?? .null
                bytes.removeLast()
                bytes.append(UInt8(ascii: ","))
                bytes.append(contentsOf: JSONValue.object([("UpdatedAt", updated)]).bytes.dropFirst())
            }
            return SharedBody(bytes)
        }
        return Self.kept(in: home.currentRevision(of: key)?.api, for: room, in: home, user: user, make: make)
    }

    /// The document kept in `slot`, made and kept now if there is none. Read without a lock: every request
    /// for the room reads the same slot. The room is not compared with the one the document was made of
    /// (a comparison retains each of its fields, on every request): debug builds check that it is the
    /// home's.
    private static func kept(in slot: PreparedSlot?, for room: Room, in home: Home, user: String,
                             make: () -> SharedBody) -> SharedBody {
        assert(home.user(id: user)?.rooms.first { $0.id == room.id } == room, "not the home's room: \(user)/\(room.id)")
        guard let slot else { return make() }
        return slot.value(orMake: make) ?? make()
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

    /// Rooms that went (README, "Managing the home"): their users' lists are dropped, so rooms made and
    /// deleted while running don't pile up (their documents went with their revisions).
    public func forget(_ keys: [RoomKey]) {
        lists.withLock { lists in
            for key in keys { lists[key.user] = nil }
        }
    }
}

/// One revision of one room in a `Home`: its number, and the room's documents for it once made
/// (`RoomDocuments`). Every copy of the home with this revision shares it, so a request finds the
/// documents in the home it reads, without a lock (docs/performance.md, "Fewer shared locks").
public final class RoomRevision: Sendable {
    public let number: Int
    /// The seed document and the API's, each stored once.
    let seed = PreparedSlot()
    let api = PreparedSlot()

    init(_ number: Int) {
        self.number = number
    }

    func next() -> RoomRevision { RoomRevision(number + 1) }
}
