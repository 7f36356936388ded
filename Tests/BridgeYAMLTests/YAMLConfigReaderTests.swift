import BridgeCore
import BridgeYAML
import Testing

@Suite("YAMLConfigReader: documents that parse")
struct YAMLConfigReaderTests {
    @Test("a sequence of mappings with flow collections keeps structure and 1-based lines")
    func usersExample() throws {
        let yaml = """
            users:
              - id: "1"
                username: Cemalettin
                rooms:
                  - name: Livingroom
                  - { name: Kitchen, sensors: [Temperature, Humidity, Lights, Gas] }
            """
        let root = try YAMLConfigReader.parse(yaml)

        let kitchenSensors: [ConfigNode] = ["Temperature", "Humidity", "Lights", "Gas"].map {
            .scalar($0, isQuoted: false, line: 0)
        }
        let expected = ConfigNode.mapping([
            (key: "users", value: .sequence([
                .mapping([
                    (key: "id", value: .scalar("1", isQuoted: true, line: 0)),
                    (key: "username", value: .scalar("Cemalettin", isQuoted: false, line: 0)),
                    (key: "rooms", value: .sequence([
                        .mapping([(key: "name", value: .scalar("Livingroom", isQuoted: false, line: 0))], line: 0),
                        .mapping([
                            (key: "name", value: .scalar("Kitchen", isQuoted: false, line: 0)),
                            (key: "sensors", value: .sequence(kitchenSensors, line: 0)),
                        ], line: 0),
                    ], line: 0)),
                ], line: 0),
            ], line: 0)),
        ], line: 0)
        #expect(root == expected)

        // ConfigNode's == ignores lines, so check them one by one.
        let user = try #require(root["users"]?[0])
        let rooms = try #require(user["rooms"])
        #expect(root.line == 1)
        #expect(root["users"]?.line == 2)
        #expect(user.line == 2)
        #expect(user["id"]?.line == 2)
        #expect(user["username"]?.line == 3)
        #expect(rooms.line == 5)
        #expect(rooms[0]?.line == 5)
        #expect(rooms[0]?["name"]?.line == 5)
        #expect(rooms[1]?.line == 6)
        #expect(rooms[1]?["sensors"]?.line == 6)
        #expect(rooms[1]?["sensors"]?[3]?.text == "Gas")
    }

    @Test("nested block mappings report the line of their first key")
    func nestedMappingLines() throws {
        let root = try YAMLConfigReader.parse("""
            # leading comment

            mqtt:
              host: broker.local
              port: 1883
              tls:
                enabled: true
            http:
              port: 8080
            """)
        #expect(root.keys == ["mqtt", "http"])
        #expect(root["mqtt"]?.line == 4)
        #expect(root["mqtt"]?["port"]?.text == "1883")
        #expect(root["mqtt"]?["port"]?.line == 5)
        #expect(root["mqtt"]?["tls"]?.line == 7)
        #expect(root["mqtt"]?["tls"]?["enabled"]?.line == 7)
        #expect(root["http"]?["port"]?.line == 9)
    }

    @Test("quoted and block scalars are marked quoted, plain ones are not")
    func quotedVersusPlain() throws {
        let root = try YAMLConfigReader.parse("""
            plain: 5
            double: "5"
            single: '5'
            literal: |
              line one
              line two
            folded: >
              folded
              text
            escaped: "tab\\there"
            """)
        #expect(root["plain"]?.text == "5")
        #expect(root["plain"]?.isQuoted == false)
        #expect(root["double"]?.text == "5")
        #expect(root["double"]?.isQuoted == true)
        #expect(root["single"]?.isQuoted == true)
        #expect(root["literal"]?.text == "line one\nline two\n")
        #expect(root["literal"]?.isQuoted == true)
        #expect(root["literal"]?.line == 4)
        #expect(root["folded"]?.text == "folded text\n")
        #expect(root["folded"]?.isQuoted == true)
        #expect(root["escaped"]?.text == "tab\there")
    }

    @Test("a quoted scalar may hold an escaped NUL without being cut short")
    func embeddedNul() throws {
        let root = try YAMLConfigReader.parse(#"key: "a\0b""#)
        #expect(root["key"]?.text == "a\u{0}b")
    }

    @Test("plain ~, null, Null, NULL and empty values are null; other spellings and quoted ones are not")
    func nullForms() throws {
        let root = try YAMLConfigReader.parse("""
            tilde: ~
            lower: null
            title: Null
            upper: NULL
            empty:
            quoted: "null"
            quotedEmpty: ""
            mixed: nUll
            list:
              -
              - ~
            """)
        for key in ["tilde", "lower", "title", "upper", "empty"] {
            #expect(root[key]?.isNull == true, "\(key)")
        }
        #expect(root["empty"]?.line == 5)
        #expect(root["quoted"] == .scalar("null", isQuoted: true, line: 0))
        #expect(root["quotedEmpty"] == .scalar("", isQuoted: true, line: 0))
        #expect(root["mixed"] == .scalar("nUll", isQuoted: false, line: 0))
        #expect(root["list"] == .sequence([.null(line: 0), .null(line: 0)], line: 0))
    }

    @Test("duplicate keys are kept, in file order")
    func duplicateKeys() throws {
        let root = try YAMLConfigReader.parse("""
            port: 1
            host: a
            port: 2
            """)
        guard case .mapping(let entries, _) = root else {
            Issue.record("expected a mapping, got \(root)")
            return
        }
        #expect(entries.map(\.key) == ["port", "host", "port"])
        #expect(entries.map(\.value.text) == ["1", "a", "2"])
        #expect(entries.map(\.value.line) == [1, 2, 3])
    }

    @Test("an alias becomes a copy of its anchored node")
    func aliases() throws {
        let root = try YAMLConfigReader.parse("""
            defaults: &defaults
              retries: 3
              sensors: [Temperature, Gas]
            name: &name Kitchen
            room:
              settings: *defaults
              label: *name
            """)
        let defaults = try #require(root["defaults"])
        #expect(root["room"]?["settings"] == defaults)
        #expect(root["room"]?["settings"]?["sensors"]?[1]?.text == "Gas")
        #expect(root["room"]?["label"] == .scalar("Kitchen", isQuoted: false, line: 0))
        // The copy points at the lines where its content is written.
        #expect(root["room"]?["settings"]?["retries"]?.line == 2)
    }

    @Test("an anchored scalar can be reused as a key")
    func aliasAsKey() throws {
        let root = try YAMLConfigReader.parse("""
            first: &k shared
            *k : value
            """)
        #expect(root.keys == ["first", "shared"])
        #expect(root["shared"]?.text == "value")
    }

    @Test("a later anchor with the same name replaces the earlier one")
    func anchorRedefinition() throws {
        let root = try YAMLConfigReader.parse("""
            a: &x one
            b: &x two
            c: *x
            """)
        #expect(root["c"]?.text == "two")
    }

    @Test("tags are ignored")
    func tagsIgnored() throws {
        let root = try YAMLConfigReader.parse("""
            port: !!str 8080
            list: !custom [a]
            """)
        #expect(root["port"] == .scalar("8080", isQuoted: false, line: 0))
        #expect(root["list"] == .sequence([.scalar("a", isQuoted: false, line: 0)], line: 0))
    }

    @Test(
        "an empty document is an empty mapping on line 1",
        arguments: ["", "# just a comment\n\n# another\n", "---\n"]
    )
    func emptyDocument(yaml: String) throws {
        let root = try YAMLConfigReader.parse(yaml)
        guard case .mapping(let entries, let line) = root else {
            Issue.record("expected a mapping, got \(root)")
            return
        }
        #expect(entries.isEmpty)
        #expect(line == 1)
    }

    @Test("a document may have a non-mapping root; validating its shape is the core's job")
    func nonMappingRoot() throws {
        #expect(try YAMLConfigReader.parse("- a\n- b\n") == .sequence([
            .scalar("a", isQuoted: false, line: 0), .scalar("b", isQuoted: false, line: 0),
        ], line: 0))
        #expect(try YAMLConfigReader.parse("~").isNull)
        #expect(try YAMLConfigReader.parse("hello") == .scalar("hello", isQuoted: false, line: 0))
    }

    @Test("one explicit document with start and end markers is accepted")
    func explicitSingleDocument() throws {
        let root = try YAMLConfigReader.parse("%YAML 1.1\n---\nkey: value\n...\n")
        #expect(root["key"]?.text == "value")
        #expect(root["key"]?.line == 3)
    }

    @Test("collections may nest 100 levels deep")
    func deepestAllowedNesting() throws {
        let depth = 100
        let yaml = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        var node = try YAMLConfigReader.parse(yaml)
        for _ in 1..<depth {
            node = try #require(node[0])
        }
        #expect(node == .sequence([], line: 0))
    }
}
