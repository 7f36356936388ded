/// The text format of Server-Sent Events (`event:`/`data:` lines, a blank line after each).
public enum ServerSentEvents {
    /// One event; the data is one line of JSON, so it needs no splitting.
    public static func event(_ name: String, _ data: JSONValue) -> [UInt8] {
        Array("event: \(name)\ndata: \(data.serialized)\n\n".utf8)
    }

    /// One event from JSON already serialized elsewhere (an event another bridge instance
    /// published); `nil` when the text or the name would break the line format.
    public static func event(_ name: String, json: String) -> [UInt8]? {
        let breaksLine: (Character) -> Bool = { $0 == "\n" || $0 == "\r" }
        guard !name.isEmpty, !name.contains(where: breaksLine), !json.contains(where: breaksLine) else { return nil }
        return Array("event: \(name)\ndata: \(json)\n\n".utf8)
    }

    /// A comment line: keeps proxies and the client's timeout from closing an idle stream.
    public static let heartbeat: [UInt8] = Array(": heartbeat\n\n".utf8)

    /// Sent first: how long the browser waits before reconnecting (milliseconds).
    public static let preamble: [UInt8] = Array("retry: 3000\n\n".utf8)

    /// The last event of a stream whose session (token) has expired; the client logs in again.
    public static let sessionExpired = event("session_expired", .object([
        ("type", .string("session_expired")),
        ("message", .string("the session's token has expired; log in again")),
    ]))

    /// The last event a client too slow to keep up gets before its stream is closed.
    public static let overflow = event("overflow", .object([
        ("type", .string("overflow")),
        ("message", .string("client too slow: events were dropped and the stream is closed; reconnect")),
    ]))
}
