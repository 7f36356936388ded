import BridgeCore
import BridgeYAML

/// Reads the bridge's YAML config file and applies `SMARTHOME_*` environment overrides.
public enum ConfigFile {
    /// The file used when `--config` is not given.
    public static let defaultPath = "config/bridge.yaml"

    /// Loads and validates; every problem comes back with its key path.
    public static func load(path: String, environment: [String: String]) -> Result<BridgeConfiguration, ConfigIssues> {
        let document: ConfigNode
        do {
            document = try YAMLConfigReader.parseFile(atPath: path)
        } catch {
            return .failure(ConfigIssues(issues: [error]))
        }
        return ConfigLoader.load(document, environment: environment)
    }

    /// What is worth a warning but does not stop the bridge, logged at start and listed by
    /// `check-config`: `SMARTHOME_*` variables that set nothing.
    public static func warnings(environment: [String: String]) -> [ConfigIssue] {
        ConfigLoader.unknownEnvironment(environment)
    }
}
