import BridgeCore
import BridgeStorage

/// The bridge's MQTT client id when the config sets no `mqtt.client_id` (README, "MQTT", client
/// ids): `smarthome-bridge-<base topic>-<install id>`, the install id made at the first start and
/// kept in the database (table `settings`), like the session key.
///
/// Why: mosquitto gives a client id to whichever client connected with it last and closes the
/// older connection. An id any account can work out from the base topic let every user kick the
/// bridge off the broker, again and again. Brokers do not publish client ids, so a random one is
/// known only to the bridge (and whoever reads its database or log).
enum ClientIdentity {
    static let setting = "mqtt_client_install_id"

    /// `configuration` with `mqtt.client_id` set to this installation's default, unless it sets one.
    /// - Parameter random: 64 random bits; injected so tests can choose them.
    static func applyingInstallDefault(
        to configuration: BridgeConfiguration,
        random: () -> UInt64 = { UInt64.random(in: .min ... .max) }
    ) throws -> BridgeConfiguration {
        guard configuration.mqtt.clientID == nil else { return configuration }
        let database = try Database.open(configuration)
        let installID = try SettingsStore(database: database).value(of: setting) { format(random()) }
        var copy = configuration
        copy.mqtt.clientID = configuration.mqtt.defaultClientID(installID: installID)
        return copy
    }

    /// 16 lowercase hex digits.
    static func format(_ bits: UInt64) -> String {
        let hex = String(bits, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
