import Foundation

/// A number with a fixed number of decimals, exactly as C's `printf("%.*f")` writes it (the
/// original backend's payloads), but cheap enough for every reading and every HTTP answer.
///
/// The usual case (a sensor value with up to a few decimals) is rounded in integer arithmetic.
/// That agrees with printf, which rounds the double's exact binary value, whenever the scaled
/// value is clearly away from a tie: the one multiplication errs by far less than the margin.
/// Near a tie, and for very large or very small numbers, `vsnprintf` decides.
enum FixedDecimals {
    /// Powers of ten that are exact doubles.
    private static let powersOfTen: [Double] = (0...15).map { pow(10, Double($0)) }
    /// Below this the multiplication's error (< 1e6 × 2⁻⁵³) is far inside `tieMargin`.
    private static let integerLimit = 1e6
    private static let tieMargin = 1e-6

    static func text(_ value: Double, decimals: Int) -> String {
        integerRounded(value, decimals: decimals) ?? printed(value, decimals: decimals)
    }

    /// nil when integer rounding could differ from printf's.
    static func integerRounded(_ value: Double, decimals: Int) -> String? {
        guard value.isFinite, decimals >= 0, decimals < powersOfTen.count else { return nil }
        let scaled = value.magnitude * powersOfTen[decimals]
        guard scaled < integerLimit else { return nil }
        let whole = scaled.rounded(.down)
        let fraction = scaled - whole
        guard (fraction - 0.5).magnitude > tieMargin else { return nil }
        let digits = String(Int(whole) + (fraction > 0.5 ? 1 : 0))
        // At least one digit before the point: 5 with 2 decimals is "0.05".
        let padded = String(repeating: "0", count: max(0, decimals + 1 - digits.utf8.count)) + digits
        let sign = value.sign == .minus ? "-" : ""
        guard decimals > 0 else { return sign + padded }
        let point = padded.index(padded.endIndex, offsetBy: -decimals)
        return sign + padded[..<point] + "." + padded[point...]
    }

    /// `%.*f` through `vsnprintf` into a stack buffer.
    static func printed(_ value: Double, decimals: Int) -> String {
        // Room for 309 integer digits, or "-0." and up to 326 decimals (the smallest subnormal).
        let capacity = 352
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer in
            let written = withVaList([Int32(decimals), value]) { arguments in
                vsnprintf(buffer.baseAddress!, capacity, "%.*f", arguments)
            }
            guard written >= 0, Int(written) < capacity else { return String(format: "%.\(decimals)f", value) }
            return String(cString: buffer.baseAddress!)
        }
    }
}
