import Synchronization

/// Each room's JSON in the seed shape (README, "HTTP"), serialised once per change of the room and
/// reused by everyone who sends it: the MQTT room topic, the seed route and the API. A document
/// is checked against the room's revision in the home it is asked for, so it is never stale; at
/// most one per configured room is kept.
public final class RoomDocuments: Sendable {
    private struct Document {
        var revision: Int
        var bytes: [UInt8]
    }

    private let documents = Mutex<[RoomKey: Document]>([:])

    public init() {}

    /// The room's document as `home` has it.
    public func document(_ room: Room, user: String, in home: Home) -> [UInt8] {
        let key = RoomKey(user: user, room: room.id)
        let revision = home.revision(of: key)
        if let cached = documents.withLock({ $0[key] }), cached.revision == revision { return cached.bytes }
        let bytes = SeedShapes.room(room, user: user, in: home).bytes
        documents.withLock { documents in
            // A newer revision stored meanwhile by another thread stays.
            if (documents[key]?.revision ?? -1) < revision { documents[key] = Document(revision: revision, bytes: bytes) }
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
}
