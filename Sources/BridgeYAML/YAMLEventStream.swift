import BridgeCore
import CYAML

/// Owns a libyaml parser together with the bytes it reads, and yields its events one at a time.
///
/// Noncopyable so exactly one owner frees the parser and the input buffer, on every exit path.
struct YAMLEventStream: ~Copyable {
    private let parser: UnsafeMutablePointer<yaml_parser_t>
    /// libyaml keeps a pointer into this buffer rather than copying it, so it lives as long as the parser.
    private let input: UnsafeMutableBufferPointer<UInt8>

    init(bytes: [UInt8]) throws(ConfigIssue) {
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        guard yaml_parser_initialize(parser) == 1 else {
            parser.deallocate()
            throw ConfigIssue(path: "", message: "cannot create YAML parser: out of memory")
        }
        // One spare byte keeps the buffer non-empty for empty text (libyaml asserts a non-NULL input).
        let input = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count + 1)
        _ = input.initialize(from: bytes + [0])
        // Refuse UTF-16 input instead of auto-detecting it: config files must be UTF-8.
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
        yaml_parser_set_input_string(parser, input.baseAddress, bytes.count)
        self.parser = parser
        self.input = input
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
        input.deallocate()
    }

    /// The next event, or a ConfigIssue (with an empty path) describing libyaml's error.
    mutating func next() throws(ConfigIssue) -> YAMLEvent {
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) == 1 else {
            throw syntaxIssue()
        }
        defer { yaml_event_delete(&event) }
        return YAMLEvent(copying: event)
    }

    private func syntaxIssue() -> ConfigIssue {
        let state = parser.pointee
        // libyaml names every problem except running out of memory.
        let problem = state.problem.map { String(cString: $0) } ?? "out of memory"
        let problemLine: Int
        let problemColumn: Int
        if state.error == YAML_READER_ERROR {
            // Reader errors (bad UTF-8, control characters) carry a byte offset but no mark.
            (problemLine, problemColumn) = position(ofByte: state.problem_offset)
        } else {
            (problemLine, problemColumn) = (state.problem_mark.line + 1, state.problem_mark.column + 1)
        }
        var message = "invalid YAML: \(problem) at line \(problemLine), column \(problemColumn)"
        if let context = state.context {
            let mark = state.context_mark
            message += " (\(String(cString: context)) at line \(mark.line + 1), column \(mark.column + 1))"
        }
        return ConfigIssue(path: "", message: message, line: problemLine)
    }

    /// 1-based line and byte column of `offset` in the input.
    private func position(ofByte offset: Int) -> (line: Int, column: Int) {
        let prefix = input.prefix(offset)
        let line = prefix.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        let lineStart = prefix.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
        return (line, offset - lineStart + 1)
    }
}
