import BridgeCore
import Foundation

/// Fuzzes the MQTT light-command parser, `LightCommand.parse`, with any payload bytes.
///
/// Invariants: parsing is deterministic; an accepted command parses again from its raw value, its lower-case
/// spelling, with white space around it and as `{"state":"..."}`; an accepted payload is non-empty, valid UTF-8
/// and within `maxPayloadBytes`; a plain-word payload is accepted only when it is the command's name in ASCII
/// letters of any case; a JSON object payload gets the same answer from the HTTP API's `APIBody.lights`; a
/// rejection is `bad_payload` with a short, non-empty description free of control characters.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let payload = Array(UnsafeBufferPointer(start: data, count: size))
    let result = LightCommand.parse(payload)
    require(LightCommand.parse(payload) == result, "parse is not deterministic for \(excerpt(payload))")
    switch result {
    case .success(let command):
        checkAccepted(command, payload: payload)
    case .failure(let rejection):
        checkRejected(rejection, payload: payload)
    }
    checkAgreesWithAPI(payload, result)
    return 0
}

private func checkAccepted(_ command: LightCommand, payload: [UInt8]) {
    require(!payload.isEmpty && payload.count <= LightCommand.maxPayloadBytes,
            "accepted a payload of \(payload.count) bytes")
    guard let text = String(validating: payload, as: UTF8.self) else {
        fatalError("accepted invalid UTF-8 \(excerpt(payload))")
    }
    let spellings = [
        command.rawValue, command.rawValue.lowercased(), " \(command.rawValue)\r\n",
        "{\"state\":\"\(command.rawValue.lowercased())\"}", " { \"state\" : \"\(command.rawValue)\" } ",
    ]
    for spelling in spellings {
        let again = LightCommand.parse(Array(spelling.utf8))
        require(again == .success(command),
                "\(excerpt(payload)) gave \(command) but \(spelling.debugDescription) gave \(again)")
    }
    let word = Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    if word.first != UInt8(ascii: "{") {
        // Full Unicode upper-casing maps e.g. U+FB00 (ﬀ) to "FF"; only ASCII letters spell a command.
        require(word.map(asciiUppercased) == Array(command.rawValue.utf8),
                "accepted \(excerpt(payload)) as \(command) though it is not \(command.rawValue) in any case")
    }
}

private func checkRejected(_ rejection: CommandRejection, payload: [UInt8]) {
    require(rejection.code == "bad_payload", "a payload was rejected with code \(rejection.code)")
    let description = rejection.description
    require(description.hasPrefix("bad payload: ") && description.count > "bad payload: ".count,
            "rejection of \(excerpt(payload)) has description \(description.debugDescription)")
    require(description.unicodeScalars.count <= 200,
            "rejection of \(excerpt(payload)) echoes too much: \(description.unicodeScalars.count) scalars")
    require(hasNoControlCharacters(description),
            "rejection of \(excerpt(payload)) carries a control character: \(description.debugDescription)")
}

/// A payload that is exactly a JSON object (no white space around it) is read alike over MQTT and HTTP.
private func checkAgreesWithAPI(_ payload: [UInt8], _ result: Result<LightCommand, CommandRejection>) {
    guard payload.first == UInt8(ascii: "{"), payload.last == UInt8(ascii: "}"),
          payload.count <= LightCommand.maxPayloadBytes, String(validating: payload, as: UTF8.self) != nil
    else { return }
    let api = APIBody.lights(payload)
    require((try? api.get()) == (try? result.get()),
            "\(excerpt(payload)): MQTT parse gave \(result), HTTP APIBody.lights gave \(api)")
}

private func asciiUppercased(_ byte: UInt8) -> UInt8 {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) ? byte - 0x20 : byte
}
