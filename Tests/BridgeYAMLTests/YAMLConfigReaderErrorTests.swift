import BridgeCore
import BridgeYAML
import Foundation
import Testing

@Suite("YAMLConfigReader: problems it reports")
struct YAMLConfigReaderErrorTests {
    struct SyntaxCase: Sendable, CustomTestStringConvertible {
        let name: String
        let yaml: String
        let line: Int
        let problem: String
        var testDescription: String { name }
    }

    static let syntaxCases = [
        SyntaxCase(
            name: "bad indentation",
            yaml: "mqtt:\n  host: a\n port: 1\n",
            line: 3,
            problem: "did not find expected key"
        ),
        SyntaxCase(
            name: "unclosed quote",
            yaml: "a: 1\nname: \"Kitchen\nb: 2\n",
            line: 4,
            problem: "found unexpected end of stream"
        ),
        SyntaxCase(
            name: "tab indentation",
            yaml: "mqtt:\n\thost: a\n",
            line: 2,
            problem: "found character that cannot start any token"
        ),
        SyntaxCase(
            name: "value where none is allowed",
            yaml: "a: 1\nb: c: d\n",
            line: 2,
            problem: "mapping values are not allowed in this context"
        ),
    ]

    @Test("a syntax error names libyaml's problem and the 1-based line", arguments: syntaxCases)
    func syntaxError(_ syntaxCase: SyntaxCase) throws {
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse(syntaxCase.yaml) }
        #expect(issue?.line == syntaxCase.line)
        #expect(issue?.message.contains(syntaxCase.problem) == true, "\(issue?.message ?? "")")
        #expect(issue?.message.contains("line \(syntaxCase.line), column") == true, "\(issue?.message ?? "")")
    }

    @Test("libyaml's context is part of the message, with its own line and column")
    func syntaxErrorContext() throws {
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse("a: 1\nname: \"Kitchen\nb: 2\n") }
        #expect(issue?.message == """
            invalid YAML: found unexpected end of stream at line 4, column 1 \
            (while scanning a quoted scalar at line 2, column 7)
            """)
    }

    @Test("a syntax error carries the key path reached so far")
    func syntaxErrorPath() throws {
        let yaml = """
            users:
              - id: "1"
                rooms:
                  - name: Livingroom
                  - name: "Kitchen
            """
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse(yaml) }
        #expect(issue?.path == "users[0].rooms[1].name")
        #expect(issue?.description.hasPrefix("users[0].rooms[1].name: invalid YAML:") == true)
    }

    @Test("a syntax error before any key has an empty path")
    func syntaxErrorAtTop() throws {
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse("\"unclosed") }
        #expect(issue?.path == "")
        #expect(issue?.line == 1)
    }

    @Test("a mapping or sequence used as a key is an issue naming its line")
    func nonScalarKey() throws {
        let sequenceKey = #expect(throws: ConfigIssue.self) {
            try YAMLConfigReader.parse("rooms:\n  name: a\n  [x, y]: b\n")
        }
        #expect(sequenceKey?.path == "rooms")
        #expect(sequenceKey?.line == 3)
        #expect(sequenceKey?.message.contains("mapping key must be a scalar") == true)
        #expect(sequenceKey?.description.contains("(line 3)") == true)

        let mappingKey = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse("a: 1\n? {b: c}\n: d\n") }
        #expect(mappingKey?.line == 2)
        #expect(mappingKey?.message.contains("not a mapping") == true)
    }

    @Test("an alias to a mapping used as a key is an issue at the alias's line")
    func aliasedNonScalarKey() throws {
        let issue = #expect(throws: ConfigIssue.self) {
            try YAMLConfigReader.parse("base: &b {x: 1}\nother:\n  *b : 2\n")
        }
        #expect(issue?.line == 3)
        #expect(issue?.path == "other")
        #expect(issue?.message.contains("mapping key must be a scalar") == true)
    }

    @Test("an unknown alias is an issue")
    func unknownAlias() throws {
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse("a: 1\nroom:\n  label: *missing\n") }
        #expect(issue?.message == "unknown alias *missing")
        #expect(issue?.path == "room.label")
        #expect(issue?.line == 3)
    }

    @Test("an alias inside its own anchored node is an issue, not an endless copy")
    func selfReferencingAlias() throws {
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse("loop: &a [1, *a]\n") }
        #expect(issue?.message == "unknown alias *a")
        #expect(issue?.path == "loop[1]")
    }

    @Test("nesting deeper than 100 levels is an issue, so consumers recursing over the tree stay safe")
    func tooDeepNesting() throws {
        let yaml = "a:\n  b: " + String(repeating: "[", count: 99) + String(repeating: "]", count: 99)
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse(yaml) }
        #expect(issue?.message == "collections nested deeper than 100 levels")
        #expect(issue?.line == 2)
        #expect(issue?.path == "a.b" + String(repeating: "[0]", count: 98))
    }

    @Test("more than one document is an issue")
    func multipleDocuments() throws {
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parse("a: 1\n---\nb: 2\n") }
        #expect(issue?.message == "config file must hold one YAML document")
        #expect(issue?.line == 2)
    }

    @Test("a missing file is an issue naming the path and the system's reason")
    func missingFile() throws {
        let path = "/nonexistent-\(UUID().uuidString)/bridge.yaml"
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parseFile(atPath: path) }
        #expect(issue?.path == "")
        #expect(issue?.message == "cannot read config file \(path): No such file or directory")
    }

    @Test("a directory is not a readable config file")
    func directoryInsteadOfFile() throws {
        let path = FileManager.default.temporaryDirectory.path
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parseFile(atPath: path) }
        #expect(issue?.message == "cannot read config file \(path): Is a directory")
    }

    @Test("a file is read and parsed")
    func parseFile() throws {
        let url = try temporaryFile(Data("mqtt:\n  host: broker\n".utf8))
        defer { try? FileManager.default.removeItem(at: url) }
        let root = try YAMLConfigReader.parseFile(atPath: url.path)
        #expect(root["mqtt"]?["host"]?.text == "broker")
        #expect(root["mqtt"]?["host"]?.line == 2)
    }

    @Test("a file with invalid UTF-8 is an issue at the offending line")
    func invalidUTF8() throws {
        let url = try temporaryFile(Data("a: 1\nb: caf".utf8) + Data([0xFF]) + Data("\n".utf8))
        defer { try? FileManager.default.removeItem(at: url) }
        let issue = #expect(throws: ConfigIssue.self) { try YAMLConfigReader.parseFile(atPath: url.path) }
        #expect(issue?.line == 2)
        let message = issue?.message ?? ""
        #expect(message.contains("invalid leading UTF-8 octet at line 2, column 7"), "\(message)")
    }

    private func temporaryFile(_ contents: Data) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("bridge-yaml-\(UUID().uuidString).yaml")
        try contents.write(to: url)
        return url
    }
}

@Suite struct YAMLAliasLimitTests {
    @Test func aliasesCannotNestPastTheDepthLimit() {
        let deep = "a: &a " + String(repeating: "[", count: 60) + "1" + String(repeating: "]", count: 60) + "\nb: "
            + String(repeating: "[", count: 60) + "*a" + String(repeating: "]", count: 60) + "\n"
        #expect(throws: ConfigIssue.self) { _ = try YAMLConfigReader.parse(deep) }
        do {
            _ = try YAMLConfigReader.parse(deep)
        } catch {
            #expect(error.message.contains("nests collections deeper than 100 levels"), "\(error)")
        }
    }

    @Test func aliasesCannotMultiplyASmallFileIntoMillionsOfValues() {
        let keys = Array(repeating: "K", count: 2000).joined(separator: ",")
        let users = Array(repeating: "*u", count: 2000).joined(separator: ",")
        let bomb = "r: &r [\(keys)]\nu: &u {id: \"1\", username: a, rooms: *r}\nusers: [\(users)]\n"
        do {
            _ = try YAMLConfigReader.parse(bomb)
            Issue.record("an alias bomb was accepted")
        } catch {
            #expect(error.message.contains("more than 100000 values once aliases are expanded"), "\(error)")
        }
        // Ordinary aliases still work.
        #expect((try? YAMLConfigReader.parse("a: &a [1, 2]\nb: *a\n")) != nil)
    }
}
