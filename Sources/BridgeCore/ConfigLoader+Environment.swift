extension ConfigLoader {
    /// `SMARTHOME_*` variables the bridge reads that are not config keys.
    public static let otherVariables: Set<String> = ["SMARTHOME_CONFIG"]

    /// Names longer than this are not compared with the keys' names: nothing that long is a misspelling
    /// of one, and the comparison's work grows with the product of the two lengths.
    static let longestComparedName = 100

    /// The `SMARTHOME_*` variables that set nothing, each with the likely key when one is close
    /// (README "Configuration"). An unknown key in the file is an error; an unknown variable is only
    /// a warning, because the environment holds much the bridge does not own (another tool's
    /// variables, a shared `.env` file), but it must not be ignored silently.
    public static func unknownEnvironment(_ environment: [String: String]) -> [ConfigIssue] {
        let known = Set(ConfigKey.all.map(\.environmentName)).union(otherVariables)
        return environment.keys.sorted().compactMap { name in
            guard name.uppercased().hasPrefix("SMARTHOME_"), !known.contains(name) else { return nil }
            var message = "is not a known variable and is ignored"
            if let key = closestKey(to: name) {
                message += "; did you mean \(key.environmentName) (\(key.path))?"
            }
            return ConfigIssue(path: name, message: message)
        }
    }

    /// The key whose variable is within a few edits of `name` (case aside), the closest first.
    static func closestKey(to name: String) -> ConfigKey? {
        guard name.count <= longestComparedName else { return nil }
        let typed = Array(name.uppercased().utf8)
        let scored = ConfigKey.all.map { key in (key, editDistance(typed, Array(key.environmentName.utf8))) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= 3 else { return nil }
        return best.0
    }

    /// Levenshtein distance: insertions, deletions and substitutions of single bytes.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
