import BridgeCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads YAML config text into the core's format-neutral `ConfigNode` tree, using libyaml's event parser.
public enum YAMLConfigReader {
    /// Parses YAML text into a ConfigNode tree.
    ///
    /// Plain scalars `~`, `null`, `Null`, `NULL` and empty values become `.null`; quoted and block scalars are
    /// marked `isQuoted`. Aliases become copies of their anchored node; tags are ignored. An empty document
    /// (empty text or only comments) is `.mapping([], line: 1)`.
    ///
    /// - Throws: `ConfigIssue` on a syntax error (path is the key path reached so far, message gives libyaml's
    ///   problem and context with 1-based line and column), a non-scalar mapping key, an unknown alias, or more
    ///   than one document.
    public static func parse(_ text: String) throws(ConfigIssue) -> ConfigNode {
        try parse(bytes: Array(text.utf8))
    }

    /// Reads and parses the YAML file at `path`.
    ///
    /// - Throws: `ConfigIssue(path: "", message: "cannot read config file <path>: <strerror>")` when the file
    ///   cannot be read, and otherwise what `parse(_:)` throws.
    public static func parseFile(atPath path: String) throws(ConfigIssue) -> ConfigNode {
        // The raw bytes go to libyaml unchanged so it, not a lenient String decoder, rejects invalid UTF-8.
        try parse(bytes: readFile(atPath: path))
    }

    private static func parse(bytes: [UInt8]) throws(ConfigIssue) -> ConfigNode {
        var stream = try YAMLEventStream(bytes: bytes)
        var builder = YAMLTreeBuilder()
        return try builder.build(from: &stream)
    }

    private static func readFile(atPath path: String) throws(ConfigIssue) -> [UInt8] {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else {
            throw readIssue(path: path, errorNumber: errno)
        }
        defer { close(descriptor) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                contents += chunk[..<count]
            } else if count == 0 {
                return contents
            } else if errno != EINTR {
                // A directory opens fine and only fails here, with EISDIR.
                throw readIssue(path: path, errorNumber: errno)
            }
        }
    }

    private static func readIssue(path: String, errorNumber: Int32) -> ConfigIssue {
        ConfigIssue(path: "", message: "cannot read config file \(path): \(String(cString: strerror(errorNumber)))")
    }
}
