import BridgeCore
import Foundation
import Synchronization

/// Writes log lines to standard error: a timestamp, the level, a short message and `key=value`
/// metadata (`user=1 room=kitchen`). Safe to use from any thread, including C callback threads.
public struct Logger: Sendable {
    public typealias Level = BridgeConfiguration.Log.Level

    public var minimumLevel: Level
    private let output: LogOutput

    public init(level: Level, output: LogOutput = .standardError) {
        minimumLevel = level
        self.output = output
    }

    public func debug(_ message: String, _ metadata: KeyValuePairs<String, String> = [:]) {
        log(.debug, message, metadata)
    }

    public func info(_ message: String, _ metadata: KeyValuePairs<String, String> = [:]) {
        log(.info, message, metadata)
    }

    public func warning(_ message: String, _ metadata: KeyValuePairs<String, String> = [:]) {
        log(.warning, message, metadata)
    }

    public func error(_ message: String, _ metadata: KeyValuePairs<String, String> = [:]) {
        log(.error, message, metadata)
    }

    public func log(_ level: Level, _ message: String, _ metadata: KeyValuePairs<String, String>) {
        guard level >= minimumLevel else { return }
        var line = "\(Timestamp.iso8601(Date())) \(level.rawValue.uppercased()) \(message)"
        for (key, value) in metadata {
            line += " \(key)=\(Logger.quoteIfNeeded(value))"
        }
        output.write(line + "\n")
    }

    /// Values with spaces, quotes or control characters are quoted so a line stays one line.
    static func quoteIfNeeded(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0.value < 0x20 }
        guard needsQuotes else { return value }
        let escaped = value.unicodeScalars.map { scalar -> String in
            switch scalar {
            case "\"": return "\\\""
            case "\\": return "\\\\"
            case "\n": return "\\n"
            case _ where scalar.value < 0x20: return "?"
            default: return String(scalar)
            }
        }.joined()
        return "\"\(escaped)\""
    }
}

/// Where log lines go; one lock keeps lines from different threads whole.
public final class LogOutput: Sendable {
    private let lock = Mutex(())
    private let handle: FileHandle

    public init(handle: FileHandle) {
        self.handle = handle
    }

    public static let standardError = LogOutput(handle: .standardError)

    func write(_ line: String) {
        lock.withLock { _ in handle.write(Data(line.utf8)) }
    }
}
