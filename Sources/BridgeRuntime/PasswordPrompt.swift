import Foundation
import Glibc

/// Reads a password for `hash-password` from standard input: at a terminal with a prompt on standard
/// error and the terminal's echo off (asked twice, as `mosquitto_passwd` does, since a typo can't be
/// seen), otherwise one line as piped in (README "Command line").
enum PasswordPrompt {
    enum Outcome: Equatable {
        case password(String)
        case noInput
        case mismatch
    }

    /// The longest line read, in bytes: a password is short, and a pipe must not fill memory.
    static let maximumLength = 4096

    static func read() -> Outcome {
        guard isatty(STDIN_FILENO) == 1 else {
            guard let line = readBoundedLine() else { return .noInput }
            return .password(line)
        }
        var original = termios()
        guard tcgetattr(STDIN_FILENO, &original) == 0 else {
            return readBoundedLine().map(Outcome.password) ?? .noInput
        }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ECHONL)
        let saved = original
        // Ctrl-C while echo is off must not leave the terminal silent for the shell.
        let restore = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { signal in
            var saved = saved
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
            exit(128 + signal)
        }
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
            restore.cancel()
        }
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        FileHandle.standardError.write(Data("Password: ".utf8))
        guard let first = readBoundedLine() else { return .noInput }
        FileHandle.standardError.write(Data("Again: ".utf8))
        guard let second = readBoundedLine() else { return .noInput }
        return first == second ? .password(first) : .mismatch
    }

    /// One line without its newline; `nil` at the end of input. Bytes past `maximumLength` are read
    /// and dropped, so that the result is refused for its length rather than cut silently.
    private static func readBoundedLine() -> String? {
        var bytes: [UInt8] = []
        var sawAny = false
        var byte: UInt8 = 0
        while Glibc.read(STDIN_FILENO, &byte, 1) == 1 {
            sawAny = true
            if byte == UInt8(ascii: "\n") { break }
            if bytes.count <= maximumLength { bytes.append(byte) }
        }
        guard sawAny else { return nil }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
