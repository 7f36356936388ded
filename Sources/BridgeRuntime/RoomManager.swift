import BridgeCore
import BridgeStorage
import Synchronization

/// Rooms made while the bridge runs (README, "Managing the home"), for the API and the MQTT
/// requests: each change is checked by `RoomRules`, stored, and applied by `HomeLayout`, under one
/// lock, so two changes never interleave and a refused one changes nothing.
final class RoomManager: RoomManagement {
    private struct State {
        /// The config file's rules (replaced by a reload).
        var rules: RoomRules
        var rows: [ManagedRoom]
    }

    private let store: ManagedRoomStore
    private let home: HomeStore
    private let layout: HomeLayout
    private let state: Mutex<State>

    init(rules: RoomRules, rows: [ManagedRoom], store: ManagedRoomStore, home: HomeStore, layout: HomeLayout) {
        self.store = store
        self.home = home
        self.layout = layout
        state = Mutex(State(rules: rules, rows: rows))
    }

    func create(user: String, _ fields: [String: Any]) -> Result<Room, RoomChangeFailure> {
        change(user) { state, user in
            state.rules.create(fields, user: user, managed: state.rows).flatMap { row, room in
                do { try store.insert(row) } catch { return .failure(.failed("\(error)")) }
                state.rows.append(row)
                return .success((room, user.rooms + [room]))
            }
        }
    }

    func update(user: String, room: String, _ fields: [String: Any]) -> Result<Room, RoomChangeFailure> {
        change(user) { state, user in
            state.rules.update(room: room, fields, user: user, managed: state.rows).flatMap { replace($0, $1, of: user, &state) }
        }
    }

    func bind(user: String, room: String, sensor: Any) -> Result<Room, RoomChangeFailure> {
        change(user) { state, user in
            state.rules.bind(room: room, sensor: sensor, user: user, managed: state.rows)
                .flatMap { replace($0, $1, of: user, &state) }
        }
    }

    func delete(user: String, room: String) -> Result<Void, RoomChangeFailure> {
        change(user) { state, user in
            state.rules.delete(room: room, user: user, managed: state.rows).flatMap { row in
                do { _ = try store.delete(user: row.user, room: row.id) } catch { return .failure(.failed("\(error)")) }
                state.rows.removeAll { $0.user == row.user && $0.id == row.id }
                return .success(((), user.rooms.filter { $0.id != row.id }))
            }
        }
    }

    func managedRooms(user: String) -> [ManagedRoom] {
        state.withLock { state in state.rows.filter { $0.user == user } }
    }

    /// The config file changed (a reload): its users and rules from now on, then the users made
    /// through the API as the database has them (`apiUsers`, given the file's users, which win a
    /// clash), with the kept rooms after theirs; applied under the same lock as every API change, so
    /// none slips in between. Returns what changed and the kept rooms left out, with why; when the
    /// API's users cannot be read, nothing changes.
    func reload(fileUsers: [User], apiUsers: ([User]) throws -> [User], rules: RoomRules) throws
        -> (diff: LayoutDiff, users: [User], skipped: [(ManagedRoom, String)])
    {
        try state.withLock { state in
            let users = fileUsers + (try apiUsers(fileUsers))
            state.rules = rules
            let merged = rules.merge(users, rows: state.rows)
            return (layout.apply(merged.users), merged.users, merged.skipped)
        }
    }

    /// Users an admin added, changed or removed (README, "Admins and unbound devices"): `change`
    /// applied to the home's users as they are now, under the lock of every room change and reload,
    /// so none undoes another. The kept rooms of a user who went (`removed`) are deleted with it, their
    /// topics and discovery configs cleared.
    func changeUsers(removed: String? = nil, _ change: ([User]) -> [User]) throws(StorageError) {
        try state.withLock { (state: inout State) throws(StorageError) in
            if let removed {
                for row in state.rows where row.user == removed { _ = try store.delete(user: row.user, room: row.id) }
                state.rows.removeAll { $0.user == removed }
            }
            layout.apply(change(home.home.users))
        }
    }

    /// Kept rooms that no longer fit the config file: logged, left in the database.
    static func log(skipped: [(ManagedRoom, String)], _ logger: Logger) {
        for (row, reason) in skipped {
            logger.warning("a room made through the API is left out", ["user": row.user, "room": row.id, "reason": reason])
        }
    }

    private func replace(_ row: ManagedRoom, _ room: Room, of user: User, _ state: inout State)
        -> Result<(Room, [Room]), RoomChangeFailure>
    {
        do { _ = try store.update(row) } catch { return .failure(.failed("\(error)")) }
        if let index = state.rows.firstIndex(where: { $0.user == row.user && $0.id == row.id }) { state.rows[index] = row }
        return .success((room, user.rooms.map { $0.id == room.id ? room : $0 }))
    }

    /// Runs one change for the user as the home has it now; when it succeeded, the user's rooms
    /// become the ones it returned (the other users stay as the home has them).
    private func change<T>(_ userID: String, _ body: (inout State, User) -> Result<(T, [Room]), RoomChangeFailure>)
        -> Result<T, RoomChangeFailure>
    {
        state.withLock { state in
            guard let user = home.home.user(id: userID) else { return .failure(.notFound) }
            return body(&state, user).map { answer, rooms in
                layout.apply(home.home.users.map { $0.id == userID ? Self.with(rooms, $0) : $0 })
                return answer
            }
        }
    }

    private static func with(_ rooms: [Room], _ user: User) -> User {
        var changed = user
        changed.rooms = rooms
        return changed
    }
}
