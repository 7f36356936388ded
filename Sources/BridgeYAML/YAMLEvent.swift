import CYAML

/// One libyaml parse event, copied into Swift values so it outlives the C event it came from.
enum YAMLEvent {
    case streamStart
    case streamEnd
    case documentStart(line: Int)
    case documentEnd
    case mappingStart(anchor: String?, line: Int)
    case mappingEnd
    case sequenceStart(anchor: String?, line: Int)
    case sequenceEnd
    case scalar(String, isPlain: Bool, anchor: String?, line: Int)
    case alias(String, line: Int)

    /// Copies everything the tree builder needs out of `event`; the caller may delete it afterwards.
    init(copying event: yaml_event_t) {
        // libyaml marks are 0-based; every line we hand out is 1-based.
        let line = event.start_mark.line + 1
        switch event.type {
        case YAML_STREAM_START_EVENT:
            self = .streamStart
        case YAML_DOCUMENT_START_EVENT:
            self = .documentStart(line: line)
        case YAML_DOCUMENT_END_EVENT:
            self = .documentEnd
        case YAML_MAPPING_START_EVENT:
            self = .mappingStart(anchor: Self.string(event.data.mapping_start.anchor), line: line)
        case YAML_MAPPING_END_EVENT:
            self = .mappingEnd
        case YAML_SEQUENCE_START_EVENT:
            self = .sequenceStart(anchor: Self.string(event.data.sequence_start.anchor), line: line)
        case YAML_SEQUENCE_END_EVENT:
            self = .sequenceEnd
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            // Use the length, not NUL termination: a quoted scalar may contain an escaped "\0".
            let bytes = UnsafeBufferPointer(start: scalar.value, count: scalar.length)
            self = .scalar(
                String(decoding: bytes, as: UTF8.self),
                isPlain: scalar.style == YAML_PLAIN_SCALAR_STYLE,
                anchor: Self.string(scalar.anchor),
                line: line
            )
        case YAML_ALIAS_EVENT:
            self = .alias(Self.string(event.data.alias.anchor) ?? "", line: line)
        default:
            // Only YAML_NO_EVENT is left, which libyaml produces solely once the stream has ended.
            self = .streamEnd
        }
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: UnsafePointer($0)) }
    }
}
