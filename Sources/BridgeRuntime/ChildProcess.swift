import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, with a clean signal mask and default signal
/// handlers.
///
/// Foundation's `Process` passes on the spawning thread's signal mask, and Swift's worker threads
/// block SIGTERM, so a child started from async code could never be stopped with SIGTERM. Its
/// `waitUntilExit` also needs a run loop. This type has neither problem.
public final class ChildProcess: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let pid: pid_t

    private init(pid: pid_t) {
        self.pid = pid
    }

    /// Starts `executable` with `arguments`.
    /// - Parameters:
    ///   - environment: the child's whole environment; `nil` passes on this process's.
    ///   - outputPath: a file that receives the child's standard output and error (`nil`: /dev/null).
    public static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, outputPath: String? = nil
    ) throws(Failure) -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let output = outputPath ?? "/dev/null"
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { env.forEach { free($0) } }

        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, env)
        guard rc == 0 else {
            throw Failure(description: "cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        return ChildProcess(pid: pid)
    }

    /// Sends a signal (SIGTERM, SIGKILL, SIGSTOP, SIGCONT, ...).
    public func signal(_ number: Int32) {
        kill(pid, number)
    }

    /// Whether the process is still running; reaps it when it has exited.
    public var isRunning: Bool {
        exitStatus(blocking: false) == nil
    }

    /// The exit status once the process has ended (128 + signal for a killed process).
    public func exitStatus(blocking: Bool) -> Int32? {
        var status: Int32 = 0
        let rc = waitpid(pid, &status, blocking ? 0 : WNOHANG)
        if rc == 0 { return nil }
        if rc < 0 { return -1 }  // already reaped
        let signalled = status & 0x7f
        return signalled == 0 ? (status >> 8) & 0xff : 128 + signalled
    }

    /// Sends SIGTERM, waits up to `timeout` seconds, then SIGKILL. Returns the exit status.
    @discardableResult
    public func terminate(timeout: Double = 5) -> Int32 {
        signal(SIGTERM)
        return waitForExit(timeout: timeout) ?? {
            signal(SIGKILL)
            return exitStatus(blocking: true) ?? -1
        }()
    }

    /// Waits up to `timeout` seconds for the process to end.
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let status = exitStatus(blocking: false) { return status }
            usleep(10_000)
        } while Date() < deadline
        return exitStatus(blocking: false)
    }
}
