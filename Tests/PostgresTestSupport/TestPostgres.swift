import BridgeRuntime
import Foundation
import Synchronization

/// A real PostgreSQL for tests (Debian's `postgresql` package): `initdb` into a temporary folder and
/// `pg_ctl start` on a free loopback port, trusting loopback connections; never the system service.
/// PostgreSQL refuses to run as root, so as root the folder is given to the `postgres` user and the
/// tools run through `runuser`.
///
/// `shared` is one server for the whole test process, each test taking a fresh database of its own
/// (`freshDatabase()`); a test that restarts the server starts a private one with `start()`. A
/// watcher process stops the server and deletes its folder when the test process ends, even
/// killed.
public final class TestPostgres: Sendable {
    public let port: Int
    public let directory: URL
    public static let user = "postgres"

    private static let binaries = URL(fileURLWithPath: "/usr/lib/postgresql/15/bin")
    private static let sharedServer = Mutex<Result<TestPostgres, TestPostgresError>?>(nil)

    /// The process's server, started on first use.
    public static func shared() throws -> TestPostgres {
        try sharedServer.withLock { slot in
            if slot == nil { slot = Result { () throws(TestPostgresError) in try TestPostgres.start() } }
            return try slot!.get()
        }
    }

    /// A new server in a new folder (up to 3 free ports tried).
    public static func start() throws(TestPostgresError) -> TestPostgres {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-\(UUID().uuidString.prefix(8))")
        let data = directory.appendingPathComponent("data")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw TestPostgresError("cannot create \(directory.path): \(error)")
        }
        if getuid() == 0 { try run(["/bin/chown", "postgres:postgres", directory.path], asPostgres: false) }
        try run([binaries.appendingPathComponent("initdb").path, "-D", data.path, "-A", "trust", "-U", user,
                 "--no-sync", "-E", "UTF8"])
        var lastError = TestPostgresError("no free port")
        for _ in 0..<3 {
            guard let port = LoopbackPort.free() else { continue }
            let server = TestPostgres(port: port, directory: directory)
            do throws(TestPostgresError) {
                try server.startServer()
                server.watchForExit()
                return server
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    private init(port: Int, directory: URL) {
        self.port = port
        self.directory = directory
    }

    private var data: URL { directory.appendingPathComponent("data") }
    private var log: URL { directory.appendingPathComponent("log") }

    /// The URL of `database` on this server, for `storage.url`.
    public func url(database: String) -> String { "postgres://\(Self.user)@127.0.0.1:\(port)/\(database)" }

    /// Creates an empty database and returns its name.
    public func freshDatabase() throws(TestPostgresError) -> String {
        let name = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        try Self.run([Self.binaries.appendingPathComponent("createdb").path, "-h", "127.0.0.1", "-p", String(port),
                      "-U", Self.user, name])
        return name
    }

    /// Starts the server (again, after `stop`) on its port; returns once it accepts connections.
    public func startServer() throws(TestPostgresError) {
        // fsync off: a test's data need not survive a power cut, and the shared machine's disk is slow.
        let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off "
            + "-c full_page_writes=off -c max_connections=200"
        do {
            try Self.run([Self.binaries.appendingPathComponent("pg_ctl").path, "-D", data.path, "-l", log.path, "-w",
                          "-t", "30", "-o", options, "start"])
        } catch {
            let tail = (try? String(contentsOf: log, encoding: .utf8))?.suffix(800) ?? ""
            throw TestPostgresError("\(error.description)\nserver log:\n\(tail)")
        }
    }

    /// Stops the server at once (`immediate`: as a crash would, committed data kept).
    public func stop() throws(TestPostgresError) {
        try Self.run([Self.binaries.appendingPathComponent("pg_ctl").path, "-D", data.path, "-m", "immediate", "-w",
                      "stop"])
    }

    /// A shell that waits for this process to end, then stops the server and deletes the folder.
    private func watchForExit() {
        let stop = "\(Self.binaries.path)/pg_ctl -D '\(data.path)' -m immediate stop"
        let script = "while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done; "
            + (getuid() == 0 ? "runuser -u postgres -- \(stop)" : stop) + " >/dev/null 2>&1; rm -rf '\(directory.path)'"
        _ = try? ChildProcess.spawn("/bin/sh", ["-c", script])
    }

    /// Runs a tool to its end (as `postgres` when this process is root); throws with its output on failure.
    /// Output goes to a file, not a pipe: the server `pg_ctl start` leaves running would hold a pipe open.
    private static func run(_ arguments: [String], asPostgres: Bool = true) throws(TestPostgresError) {
        let asOther = asPostgres && getuid() == 0
        let executable = asOther ? "/usr/sbin/runuser" : arguments[0]
        let rest = asOther ? ["-u", "postgres", "--"] + arguments : Array(arguments.dropFirst())
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("pg-tool-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let status: Int32
        do {
            status = try ChildProcess.spawn(executable, rest, outputPath: outputPath).waitForExit(timeout: 60) ?? -1
        } catch {
            throw TestPostgresError("cannot run \(arguments[0]): \(error)")
        }
        guard status == 0 else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw TestPostgresError("\(arguments.prefix(2).joined(separator: " ")) failed (\(status)): \(text)")
        }
    }
}

public struct TestPostgresError: Error, Sendable, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}
