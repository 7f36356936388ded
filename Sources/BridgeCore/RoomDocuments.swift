import Synchronization

/// Each room's JSON in the seed shape (README, "HTTP"), serialised once per change of the room and
/// reused by everyone who sends it: the MQTT room topic, the seed route and the API. A document
/// is checked against the room's revision in the home it is asked for and against the room itself
/// (a room deleted and made again with its id starts again at revision 0), so it is never stale; at
/// most one per room is kept, and a room that went is forgotten (`forget`).
public final class RoomDocuments: Sendable {
    private struct Document {
        var revision: Int
        var room: Room
        var bytes: [UInt8]
    }

    private let documents = Mutex<[RoomKey: Document]>([:])

    public init() {}

    /// The room's document as `home` has it.
    public func document(_ room: Room, user: String, in home: Home) -> [UInt8] {
        let key = RoomKey(user: user, room: room.id)
        let revision = home.revision(of: key)
        if let cached = documents.withLock({ $0[key] }), cached.revision == revision, cached.room == room {
            return cached.bytes
        }
        let bytes = SeedShapes.room(room, user: user, in: home).bytes
        documents.withLock { documents in
            // A newer revision stored meanwhile by another thread stays.
            if let stored = documents[key], stored.room == room, stored.revision >= revision { return }
            documents[key] = Document(revision: revision, room: room, bytes: bytes)
        }
        return bytes
    }

    /// The document with more members after the seed keys (`"UpdatedAt"` for the API), spliced
    /// in before its closing brace rather than serialised again.
    public func document(_ room: Room, user: String, in home: Home, extra: [(String, JSONValue)]) -> [UInt8] {
        var bytes = document(room, user: user, in: home)
        guard !extra.isEmpty, bytes.last == UInt8(ascii: "}") else { return bytes }
        bytes.removeLast()
        let members = JSONValue.object(extra).bytes
        bytes.append(UInt8(ascii: ","))
        bytes.append(contentsOf: members.dropFirst())
        return bytes
    }

    /// Rooms that went (README, "Managing the home"): their documents are dropped, so rooms made
    /// and deleted while running don't pile up.
    public func forget(_ keys: [RoomKey]) {
        documents.withLock { documents in
            for key in keys { documents[key] = nil }
        }
    }
}
