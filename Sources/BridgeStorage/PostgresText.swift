/// How values cross libpq in text form, and `?` placeholders become PostgreSQL's `$1, $2, ...`,
/// so stores keep one SQL text for both engines (README "PostgreSQL").
enum PostgresText {
    /// `sql` with each `?` outside quotes and comments numbered in order.
    static func numberingPlaceholders(_ sql: String) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var number = 0
        var quote: Character?
        var inComment = false
        var previous: Character?
        for character in sql {
            defer { previous = character }
            if inComment {
                if character == "\n" { inComment = false }
            } else if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "-", previous == "-" {
                inComment = true
            } else if character == "?" {
                number += 1
                result += "$\(number)"
                continue
            }
            result.append(character)
        }
        return result
    }

    /// A bound value as libpq's text: nil for NULL. Doubles print exactly (Swift's shortest
    /// round-tripping form), so a time read back equals the time written.
    static func parameter(_ value: SQLValue) -> String? {
        switch value {
        case .text(let text): text
        case .integer(let number): String(number)
        case .real(let number):
            number.isNaN ? "NaN" : number.isInfinite ? (number > 0 ? "Infinity" : "-Infinity") : "\(number)"
        case .null: nil
        }
    }

    /// Type ids (`pg_type.oid`) of the columns read back as numbers; every other type is text.
    private static let integerTypes: Set<UInt32> = [20, 21, 23, 26]  // int8, int2, int4, oid
    private static let realTypes: Set<UInt32> = [700, 701, 1700]  // float4, float8, numeric
    private static let booleanType: UInt32 = 16

    /// A column's text as the value it holds.
    static func value(_ text: String, type: UInt32) -> SQLValue {
        if integerTypes.contains(type), let number = Int64(text) { return .integer(number) }
        if realTypes.contains(type), let number = Double(text) { return .real(number) }
        if type == booleanType { return .integer(text == "t" ? 1 : 0) }
        return .text(text)
    }
}
