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

    /// What is worth a warning but does not stop the bridge, logged at start and listed by
    /// `check-config`: `SMARTHOME_*` variables that set nothing, and a dashboard folder that is not
    /// there (`configuration` is `nil` when the config has problems, so only the variables are checked).
    public static func warnings(configuration: BridgeConfiguration?, environment: [String: String]) -> [ConfigIssue] {
        var warnings = ConfigLoader.unknownEnvironment(environment)
        if let configuration, let problem = missingWebRoot(configuration.http.webRoot) {
            warnings.append(ConfigIssue(path: "http.web_root", message: problem))
        }
        return warnings
    }

    /// The valid but unsafe settings (README "Security model"): those the configuration shows by
    /// itself, and those the files it names show (a password file others may read or change, a
    /// dashboard folder that is a system folder). `check-config` lists them; every start logs them.
    public static func unsafeSettings(_ configuration: BridgeConfiguration) -> [String] {
        var found = configuration.warnings
        if let file = configuration.mqtt.passwordFile, let mode = permissions(of: file), mode & 0o006 != 0 {
            found.append("mqtt.password_file \(file) is \(mode & 0o004 != 0 ? "readable" : "writable") by every local "
                + "account (mode \(String(mode, radix: 8))): chmod 600 it")
        }
        let webRoot = URL(fileURLWithPath: configuration.http.webRoot).resolvingSymlinksInPath().path
        if BridgeConfiguration.HTTP.isSystemFolder(webRoot) {
            found.append("http.web_root \(configuration.http.webRoot) is the system folder \(webRoot): every file in "
                + "it is served to anyone who reaches the bridge; point it at the dashboard's own folder")
        }
        return found
    }

    /// The permission bits of the file at `path`, `nil` when it cannot be examined.
    private static func permissions(of path: String) -> Int? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int(status.st_mode) & 0o7777
    }

    /// Why the dashboard would not be served from `webRoot`, or `nil` when it is a folder. A relative
    /// path is relative to the working directory, like `storage.path` (README "Web dashboard"), so the
    /// message says where it was looked for.
    static func missingWebRoot(_ webRoot: String) -> String? {
        let folder = URL(fileURLWithPath: webRoot).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory)
        if exists, isDirectory.boolValue { return nil }
        let relative = webRoot.hasPrefix("/")
            ? "" : " (relative to the working directory \(FileManager.default.currentDirectoryPath))"
        return "\(folder)\(relative) \(exists ? "is not a folder" : "does not exist"): the dashboard at / is not served "
            + "(the API and the other routes are)"
    }
}
