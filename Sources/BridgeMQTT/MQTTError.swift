import CMosquitto

/// A libmosquitto call that failed, with the library's own explanation.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    /// The operation that failed (`publish`, `subscribe`, ...).
    public var operation: String
    /// libmosquitto's `MOSQ_ERR_*` code.
    public var code: Int32
    public var message: String

    init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
        self.message = String(cString: mosquitto_strerror(code))
    }

    public var description: String { "\(operation) failed: \(message)" }

    /// Maps a libmosquitto return code to success or a typed error, in one place.
    static func check(_ code: Int32, _ operation: String) throws(MQTTError) {
        guard code == Int32(MOSQ_ERR_SUCCESS.rawValue) else { throw MQTTError(operation, code: code) }
    }
}
