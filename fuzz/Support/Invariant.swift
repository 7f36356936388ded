/// Stops the fuzzer when an invariant does not hold, so libFuzzer saves the input as a crash.
///
/// `fatalError`, unlike `precondition`, prints its message in `-O` builds too.
func require(
    _ condition: @autoclosure () -> Bool,
    _ message: @autoclosure () -> String,
    file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() {
        fatalError("fuzz invariant violated: \(message())", file: file, line: line)
    }
}

/// The input as a Swift literal-ish string for invariant messages, cut to `limit` scalars.
func excerpt(_ bytes: [UInt8], limit: Int = 80) -> String {
    let text = String(decoding: bytes, as: UTF8.self)
    let shown = String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit)))
    return shown.debugDescription + (text.unicodeScalars.count > limit ? "…" : "")
}

/// Whether `text` holds no C0 control character (a line break or escape from the input would let it forge log lines).
func hasNoControlCharacters(_ text: String) -> Bool {
    text.unicodeScalars.allSatisfy { $0.value >= 0x20 }
}
