import BridgeCore
import BridgeYAML
import Foundation

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
        return ConfigLoader.load(document, environment: environment).flatMap { config in
            let problems = fileIssues(config)
            return problems.isEmpty ? .success(config) : .failure(ConfigIssues(issues: problems))
        }
    }

    /// The files the config names that must be readable at start, checked here so that `check-config` and
    /// start-up name the key rather than failing later with a library's message.
    static func fileIssues(_ config: BridgeConfiguration) -> [ConfigIssue] {
        [("http.tls.cert", config.http.tlsCert), ("http.tls.key", config.http.tlsKey)].compactMap { key, path in
            guard let path else { return nil }
            guard let data = FileManager.default.contents(atPath: path) else {
                return ConfigIssue(path: key, message: "cannot read \(path)")
            }
            guard String(decoding: data, as: UTF8.self).contains("-----BEGIN ") else {
                return ConfigIssue(path: key, message: "\(path) is not a PEM file (no -----BEGIN line)")
            }
            return nil
        }
    }
}
