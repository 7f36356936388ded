import BridgeCore
import BridgeStorage
import Foundation

/// The users the bridge starts with: the config file's, those an admin made through the API, and
/// the rooms made through the API or MQTT requests joined to them.
extension Bridge {
    struct StartingUsers {
        /// The file's configuration with the API's users and the managed rooms in it.
        var configuration: BridgeConfiguration
        var apiUsers: [User]
        /// Reads the API's users again (a reload); none in a cluster.
        var loadAPIUsers: @Sendable ([User]) throws -> [User]
        var managedRooms: ManagedRoomStore
        var rules: RoomRules
        var keptRooms: [ManagedRoom]
    }

    static func startingUsers(_ fileConfiguration: BridgeConfiguration, database: Database, configFile: String,
                              logger: Logger) throws -> StartingUsers {
        // Users an admin made through the API join the config's (README, "Admins and unbound devices");
        // a cluster has only the config's, which every instance reads alike.
        let clustered = fileConfiguration.cluster.instances > 1
        let loadAPIUsers: @Sendable ([User]) throws -> [User] = { [logger] configured in
            clustered ? [] : try UserAdministration.load(database, configured: configured, logger: logger)
        }
        let apiUsers = try loadAPIUsers(fileConfiguration.users)
        var configuration = fileConfiguration.adding(users: apiUsers)
        for file in database.path.map(StorageFiles.readableByOthers(databasePath:)) ?? [] {
            logger.warning("storage readable by other users; it holds the token signing key: chmod go-rwx it",
                           ["file": file])
        }
        // Rooms made through the API or MQTT requests join their users' (README, "Managing the home"):
        // the file's users' and those made through the API.
        let managedRooms = ManagedRoomStore(database: database)
        let rules = RoomRules(configuration: fileConfiguration, configFile: configFile)
        let merged: (users: [User], skipped: [(ManagedRoom, String)])
        let keptRooms: [ManagedRoom]
        do {
            keptRooms = try managedRooms.all()
            merged = rules.merge(configuration.users, rows: keptRooms)
        } catch {
            throw RuntimeError("cannot read the rooms made through the API: \(error.description)")
        }
        RoomManager.log(skipped: merged.skipped, logger)
        configuration.users = merged.users
        return StartingUsers(configuration: configuration, apiUsers: apiUsers, loadAPIUsers: loadAPIUsers,
                             managedRooms: managedRooms, rules: rules, keptRooms: keptRooms)
    }
}
