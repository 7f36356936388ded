/// What changed between two sets of users' rooms (README, "Managing the home"): the rooms to
/// announce, the rooms to clear, and the rooms whose name, sensors or bindings changed, each
/// with its user as the new set has it (the old one for removed rooms).
public struct LayoutDiff: Sendable, Equatable {
    public struct Change: Sendable, Equatable {
        public var user: User
        public var old: Room
        public var new: Room
    }

    public var added: [(user: User, room: Room)] = []
    public var removed: [(user: User, room: Room)] = []
    public var changed: [Change] = []

    public init(old: [User], new: [User]) {
        let before = Dictionary(old.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let after = Set(new.map(\.id))
        for user in new {
            let previous = before[user.id]?.rooms ?? []
            for room in user.rooms {
                if let was = previous.first(where: { $0.id == room.id }) {
                    if was != room { changed.append(Change(user: user, old: was, new: room)) }
                } else {
                    added.append((user, room))
                }
            }
            for room in previous where !user.rooms.contains(where: { $0.id == room.id }) {
                removed.append((before[user.id] ?? user, room))
            }
        }
        for user in old where !after.contains(user.id) {
            removed += user.rooms.map { (user, $0) }
        }
    }

    public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }

    /// Whether any binding to a device came, went or changed.
    public var bindingsChanged: Bool {
        added.contains { !$0.room.bindings.isEmpty } || removed.contains { !$0.room.bindings.isEmpty }
            || changed.contains { $0.old.bindings != $0.new.bindings }
    }

    public static func == (lhs: LayoutDiff, rhs: LayoutDiff) -> Bool {
        lhs.added.map { ($0.user.id, $0.room) }.elementsEqual(rhs.added.map { ($0.user.id, $0.room) }, by: ==)
            && lhs.removed.map { ($0.user.id, $0.room) }.elementsEqual(rhs.removed.map { ($0.user.id, $0.room) }, by: ==)
            && lhs.changed == rhs.changed
    }
}
