import Foundation

/// Whether a secret long enough for `cluster.secret` is still easy to guess (README "Security
/// model"). Length alone says little: `aaaa…` has 32 characters and no secret in it. The rule, for
/// a secret of n characters:
/// - the Shannon entropy of its own character frequencies, times n, is under 80 bits (32 random
///   base64 characters carry about 146 by this measure, 32 random hex digits about 116; `aaaa…`
///   carries 0, 5 distinct characters used evenly 74), or
/// - it is a shorter piece repeated (`abcdabcd…`, `0123456789abcdef0123456789abcdef`), or
/// - more than half of its neighbouring characters are one apart (`abcdefgh…`, `12345678…`).
public enum SecretStrength {
    public static let minimumEstimatedBits = 80.0

    /// Why `secret` is weak, or `nil` when none of the rules applies.
    public static func weakness(of secret: String) -> String? {
        let characters = Array(secret.unicodeScalars)
        guard !characters.isEmpty else { return "is empty" }
        let bits = estimatedBits(characters)
        if bits < minimumEstimatedBits {
            let distinct = Set(characters).count
            return "has only \(distinct) distinct character(s), about \(Int(bits)) bits by their frequencies "
                + "(at least \(Int(minimumEstimatedBits)) wanted)"
        }
        if let period = repetitionPeriod(characters) {
            return "is a piece of \(period) character(s) repeated"
        }
        let steps = zip(characters, characters.dropFirst()).count { abs(Int($0.value) - Int($1.value)) == 1 }
        if steps * 2 > characters.count - 1 {
            return "is mostly a run of consecutive characters (\(steps) of \(characters.count - 1) neighbours one apart)"
        }
        return nil
    }

    /// The secret's length times the Shannon entropy of its character frequencies.
    static func estimatedBits(_ characters: [Unicode.Scalar]) -> Double {
        var counts: [Unicode.Scalar: Int] = [:]
        for character in characters { counts[character, default: 0] += 1 }
        let total = Double(characters.count)
        let perCharacter = counts.values.reduce(0.0) { sum, count in
            let share = Double(count) / total
            return sum - share * log2(share)
        }
        return perCharacter * total
    }

    /// The shortest period p < n with the secret equal to itself shifted by p and p <= n / 2.
    static func repetitionPeriod(_ characters: [Unicode.Scalar]) -> Int? {
        let n = characters.count
        guard n >= 2 else { return nil }
        return (1...(n / 2)).first { period in
            (period..<n).allSatisfy { characters[$0] == characters[$0 - period] }
        }
    }
}
