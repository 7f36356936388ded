import BridgeCore
import BridgeCrypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `smarthome-bridge mosquitto-acl`: writes a mosquitto `password_file` and `acl_file` that confine
/// each user's MQTT account to its own topics (README, "MQTT accounts (mosquitto-acl)"), for a broker run with
/// `allow_anonymous false`.
///
/// Passwords come from `--passwords` (and the config's `mqtt.password` for the bridge's account);
/// every other account gets a random one, printed once on standard output in the `--passwords`
/// format, so that output can be kept and fed back in. Everything else goes to standard error.
public enum MosquittoACLCommand {
    static let usage = """
        Usage: smarthome-bridge mosquitto-acl [--config PATH] --password-file OUT --acl-file OUT [--passwords FILE]

        Writes a mosquitto password_file (mode 0600) and acl_file (mode 0644) with one MQTT account
        per configured user (named by its username), confined to <base>/<userID>/#: read it all,
        publish only its light commands: <base>/<userID>/+/lights/set, <base>/<userID>/lights/set and
        <base>/<userID>/groups/+/set. The bridge's own account (mqtt.username, else smarthome-bridge)
        may read and write <base>/#, the Home Assistant prefix and, with homie.enabled, Homie's.

          --passwords FILE  name:password lines (# comments and blank lines ignored). The bridge's
                            password is mqtt.password (or mqtt.password_file) when the config sets
                            one. Accounts without a password get a random one, printed once on
                            standard output.

        """

    private struct Options {
        var configPath: String
        var passwordFile: String?
        var aclFile: String?
        var passwordsInput: String?
    }

    /// Runs the command.
    /// - Parameters:
    ///   - arguments: the arguments after `mosquitto-acl`.
    ///   - configPath: the config file named before the subcommand (or the default); a `--config`
    ///     among `arguments` overrides it.
    /// - Returns: 0 on success, 2 for a usage error, 1 when an input cannot be read or is invalid,
    ///   or an output cannot be written.
    public static func run(arguments: [String], configPath: String, environment: [String: String]) -> Int32 {
        var options = Options(configPath: configPath)
        var rest = arguments
        while !rest.isEmpty {
            let argument = rest.removeFirst()
            if argument == "--help" || argument == "-h" {
                print(usage, terminator: "")
                return 0
            }
            let name: String
            var value: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            } else {
                name = argument
            }
            guard ["--config", "-c", "--password-file", "--acl-file", "--passwords"].contains(name) else {
                let what = argument.hasPrefix("-") ? "unknown option" : "unexpected argument"
                return usageError("\(what) \(argument)")
            }
            if value == nil {
                guard !rest.isEmpty else { return usageError("\(name) needs a path") }
                value = rest.removeFirst()
            }
            guard let path = value, !path.isEmpty else { return usageError("\(name) needs a path") }
            switch name {
            case "--password-file": options.passwordFile = path
            case "--acl-file": options.aclFile = path
            case "--passwords": options.passwordsInput = path
            default: options.configPath = path
            }
        }
        guard let passwordFile = options.passwordFile else { return usageError("--password-file OUT is required") }
        guard let aclFile = options.aclFile else { return usageError("--acl-file OUT is required") }
        guard absolute(passwordFile) != absolute(aclFile) else {
            return usageError("--password-file and --acl-file must be different files")
        }
        return write(options: options, passwordFile: passwordFile, aclFile: aclFile, environment: environment)
    }

    private static func write(options: Options, passwordFile: String, aclFile: String,
                              environment: [String: String]) -> Int32 {
        let configuration: BridgeConfiguration
        switch ConfigFile.load(path: options.configPath, environment: environment) {
        case .success(let loaded): configuration = loaded
        case .failure(let problems):
            let lines = problems.issues.map { "  \($0)" }.joined(separator: "\n")
            return failure("\(options.configPath) has \(problems.issues.count) problem(s)\n\(lines)")
        }

        var bridgePassword = configuration.mqtt.password
        if let file = configuration.mqtt.passwordFile {
            do {
                bridgePassword = try readText(file).trimmingCharacters(in: .newlines)
            } catch {
                return failure("cannot read mqtt.password_file \(file): \(error)")
            }
        }

        var list = MosquittoAccessControl.PasswordList()
        if let input = options.passwordsInput {
            let text: String
            do {
                text = try readText(input)
            } catch {
                return failure("cannot read --passwords \(input): \(error)")
            }
            do {
                list = try MosquittoAccessControl.PasswordList.parse(text)
            } catch {
                return failure("\(input): \(error)")
            }
        }

        let control = MosquittoAccessControl(configuration: configuration)
        let problems = control.problems()
        guard problems.isEmpty else {
            return failure("cannot write mosquitto files for \(options.configPath):\n"
                + problems.map { "  \($0)" }.joined(separator: "\n"))
        }

        let assignment = control.assignPasswords(from: list, bridgePassword: bridgePassword) {
            SessionToken.randomText(bytes: 18)
        }
        var hashes: [String: String] = [:]
        for credential in assignment.credentials {
            do {
                hashes[credential.name] = try MosquittoPasswordHash.hash(password: credential.password)
            } catch {
                return failure("cannot hash the password of \(credential.name): \(error)")
            }
        }

        let command = "smarthome-bridge mosquitto-acl --config \(options.configPath)"
        do {
            // The ACL first: should the password file then fail, no generated password has been lost.
            try writeFile(control.aclText(generatedBy: command), to: aclFile, mode: 0o644)
            try writeFile(control.passwordFileText(hashes: hashes), to: passwordFile, mode: 0o600)
        } catch {
            return failure(error.description)
        }

        for entry in assignment.unknown {
            note("warning: \(options.passwordsInput ?? "--passwords") line \(entry.line): "
                + "no account is named \"\(entry.name)\"; ignored")
        }
        if assignment.bridgeEntryOverridden {
            note("warning: the config sets the password of \(control.bridgeAccount.name); "
                + "its entry in \(options.passwordsInput ?? "--passwords") is ignored")
        }
        note("wrote \(control.accounts.count) accounts (\(control.accounts.map(\.name).joined(separator: ", "))) "
            + "to \(passwordFile) (mode 0600) and their ACL to \(aclFile) (mode 0644)")
        note("mosquitto reads these as its own user: chown mosquitto \(passwordFile) where it runs as root, "
            + "then start it (or send it SIGHUP) with allow_anonymous false, password_file and acl_file")
        if !assignment.generated.isEmpty {
            var output = "# Generated MQTT passwords, shown only this once: keep them now.\n"
                + "# (This output is a valid --passwords file: pass it back to keep these passwords.)\n"
            for credential in assignment.generated { output += "\(credential.name):\(credential.password)\n" }
            print(output, terminator: "")
        }
        return 0
    }

    // MARK: Files

    /// Writes `text` to a new file beside `path` with `mode`, then renames it over `path`, so
    /// mosquitto never reads half a file. An existing file's owner and group are kept (when this
    /// process may set them), so a file chowned to mosquitto stays readable by it.
    private static func writeFile(_ text: String, to path: String, mode: mode_t) throws(RuntimeError) {
        let temporary = "\(path).tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw RuntimeError("cannot write \(path): \(String(cString: strerror(errno)))") }
        var problem: String?
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count, problem == nil {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno != EINTR { problem = String(cString: strerror(errno)) }
            } else {
                offset += written
            }
        }
        var existing = stat()
        if problem == nil, stat(path, &existing) == 0 {
            _ = fchown(fd, existing.st_uid, existing.st_gid)  // not permitted unless root: then the new file is ours
        }
        if problem == nil, fchmod(fd, mode) != 0 || fsync(fd) != 0 { problem = String(cString: strerror(errno)) }
        if close(fd) != 0, problem == nil { problem = String(cString: strerror(errno)) }
        if problem == nil, rename(temporary, path) != 0 { problem = String(cString: strerror(errno)) }
        if let problem {
            unlink(temporary)
            throw RuntimeError("cannot write \(path): \(problem)")
        }
    }

    /// The whole file as UTF-8 text; the error is the system's reason (`No such file or directory`).
    private static func readText(_ path: String) throws(RuntimeError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw RuntimeError(String(cString: strerror(errno))) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw RuntimeError(String(cString: strerror(errno)))
            }
            bytes += buffer[0..<count]
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw RuntimeError("not UTF-8 text") }
        return text
    }

    private static func absolute(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }

    // MARK: Output

    private static func note(_ message: String) {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
    }

    private static func failure(_ message: String) -> Int32 {
        note("smarthome-bridge mosquitto-acl: \(message)")
        return 1
    }

    private static func usageError(_ message: String) -> Int32 {
        note("smarthome-bridge mosquitto-acl: \(message)\n\n\(usage)")
        return 2
    }
}
