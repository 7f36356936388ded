import BridgeCore
import BridgeStorage
import Foundation
import Synchronization

/// Reload (README, "Managing the home"): `SIGHUP` or the `config/reload` request reads the config
/// file again. A file with problems changes nothing (every problem is logged and returned); a
/// valid one is applied as a diff of the rooms, on the same MQTT connection: new rooms announced,
/// removed ones cleared, changed bindings rebound. Settings outside `users` (and `users[].notify`)
/// take effect only at a restart, which the log and the answer say.
final class ConfigReloader: BridgeFeature {
    let name = "reload"

    private let configFile: String
    private let environment: [String: String]
    private let rooms: RoomManager
    /// The users made through the API as the database has them, beside the given file users (README,
    /// "Admins and unbound devices"): they stay through a reload.
    private let apiUsers: @Sendable ([User]) throws -> [User]
    private let logger: Logger
    /// The configuration the running settings came from (its users: the file's last valid ones).
    private let current: Mutex<BridgeConfiguration>
    private let signals = CoalescedSignal()
    /// One reload at a time, in the order asked.
    private let serial = AsyncPermits(count: 1)

    /// Told of the users after each applied reload (the sessions check tokens against them).
    private let usersChanged: @Sendable ([User]) -> Void

    init(configFile: String, environment: [String: String], started: BridgeConfiguration, rooms: RoomManager,
         apiUsers: @escaping @Sendable ([User]) throws -> [User], logger: Logger,
         usersChanged: @escaping @Sendable ([User]) -> Void) {
        self.usersChanged = usersChanged
        self.apiUsers = apiUsers
        self.configFile = configFile
        self.environment = environment
        self.rooms = rooms
        self.logger = logger
        current = Mutex(started)
    }

    /// SIGHUP: a reload in `run()` (requests while one is pending coalesce into it).
    func requestReload() {
        signals.request()
    }

    func run() async {
        for await _ in signals.requests {
            if Task.isCancelled { break }
            _ = await reload()
        }
    }

    /// Reads and applies the file; the answer's data, or every problem.
    func reload() async -> Result<JSONValue, BridgeRequests.ReloadFailure> {
        _ = await serial.acquire()
        defer { serial.release() }
        let started = ContinuousClock.now
        logger.info("reloading the config file", ["file": configFile])
        let loaded: BridgeConfiguration
        switch ConfigFile.load(path: configFile, environment: environment) {
        case .failure(let problems):
            for issue in problems.issues {
                logger.error("config reload: problem in the file; nothing was changed", ["problem": issue.description])
            }
            let message = "\(configFile) has \(problems.issues.count) problem(s); nothing was changed"
            return .failure(.init(message: message, data: .object([("problems", .array(problems.issues.map(\.json)))])))
        case .success(let configuration):
            loaded = configuration
        }
        let previous = current.withLock { $0 }
        let restart = Self.settingsNeedingRestart(previous, loaded)
        if !restart.isEmpty {
            logger.warning("config reload: these settings take effect only after a restart",
                           ["settings": restart.joined(separator: ",")])
        }
        let (diff, users, skipped): (LayoutDiff, [User], [(ManagedRoom, String)])
        do {
            (diff, users, skipped) = try rooms.reload(fileUsers: loaded.users, apiUsers: apiUsers,
                                                      rules: RoomRules(configuration: loaded, configFile: configFile))
        } catch {
            logger.error("config reload: cannot read the users made through the API; nothing was changed",
                         ["error": "\(error)"])
            return .failure(.init(message: "cannot read the users made through the API (\(error)); nothing was changed",
                                  data: nil))
        }
        RoomManager.log(skipped: skipped, logger)
        usersChanged(users)
        current.withLock { $0 = loaded }
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
        logger.info("config reloaded", ["added": String(diff.added.count), "removed": String(diff.removed.count),
                                        "changed": String(diff.changed.count),
                                        "ms": String(format: "%.1f", milliseconds)])
        let rooms: (([(user: User, room: Room)]) -> JSONValue) = { list in
            .array(list.map { .object([("user", .string($0.user.id)), ("room", .string($0.room.id))]) })
        }
        return .success(.object([
            ("added", rooms(diff.added)), ("removed", rooms(diff.removed)),
            ("changed", rooms(diff.changed.map { ($0.user, $0.new) })),
            ("restartNeeded", .strings(restart)),
        ]))
    }

    /// The settings that differ between the running configuration and the file and apply only at a
    /// restart: every section outside `users` (`mqtt`, `http`, ...), and `users[].notify`.
    static func settingsNeedingRestart(_ old: BridgeConfiguration, _ new: BridgeConfiguration) -> [String] {
        var changed: [String] = []
        let before = Mirror(reflecting: old).children, after = Mirror(reflecting: new).children
        for (was, now) in zip(before, after) {
            // `file` is no setting: whoever loads the file sets it.
            guard let label = was.label, label != "users", label != "file" else { continue }
            if String(reflecting: was.value) != String(reflecting: now.value) { changed.append(label.lowercased()) }
        }
        let notify = { (users: [User]) in users.map { "\($0.id):\(String(reflecting: $0.notify))" } }
        if notify(old.users.filter { new.users.map(\.id).contains($0.id) })
            != notify(new.users.filter { old.users.map(\.id).contains($0.id) }) {
            changed.append("users[].notify")
        }
        return changed
    }
}
