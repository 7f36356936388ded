import BridgeCore

/// Fuzzes `SeedRoomParser.parse`, which reads a REST upstream's answer to `GET /rooms/:user/:room`.
///
/// Invariants: it is deterministic; an accepted answer has unique sensors with non-empty ids that
/// can be topic levels, every known sensor's value is in its vocabulary (its seed text parses back
/// to the same value); a problem has a non-empty description.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    let result = SeedRoomParser.parse(body)
    switch result {
    case .success(let readings):
        require(Set(readings.map(\.sensor)).count == readings.count, "duplicate sensors accepted: \(excerpt(body))")
        for reading in readings {
            let id = reading.sensor.id
            require(!id.isEmpty && !id.contains("/") && !id.contains("+") && !id.contains("#"),
                    "sensor id \(id.debugDescription) can't be a topic level: \(excerpt(body))")
            let text = reading.value.seedText(for: reading.sensor)
            let again = SeedValueCheck.reparse(text, reading.sensor)
            require(again == reading.value || reading.sensor.isNumeric,
                    "\(id): \(reading.value) written as \(text.debugDescription) reads back as \(String(describing: again))")
        }
        require((try? SeedRoomParser.parse(body).get())?.count == readings.count, "not deterministic: \(excerpt(body))")
    case .failure(let problem):
        require(!problem.description.isEmpty, "empty problem for \(excerpt(body))")
        if case .success = SeedRoomParser.parse(body) { require(false, "not deterministic: \(excerpt(body))") }
    }
    return 0
}

/// Reads a value back the way the parser does.
enum SeedValueCheck {
    static func reparse(_ text: String, _ sensor: SensorKind) -> SensorValue? {
        SensorValue.parse(text, for: sensor)
    }
}
