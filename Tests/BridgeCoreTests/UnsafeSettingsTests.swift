import Testing
@testable import BridgeCore

/// The valid but unsafe settings `check-config` and every start warn about (README "Security model").
@Suite struct UnsafeSettingsTests {
    func config(_ settings: [String: Any]) throws -> BridgeConfiguration {
        var all = settings
        all["users"] = Fixtures.minimalUsers
        return try ConfigLoader.load(Fixtures.node(all), environment: [:]).get()
    }

    @Test func weakSecretsOfAnyLengthAreFound() {
        for weak in [String(repeating: "a", count: 32), String(repeating: "ab", count: 40),
                     "0123456789abcdef0123456789abcdef", "abcdefghijklmnopqrstuvwxyz012345",
                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "passwordpasswordpasswordpassword"] {
            #expect(SecretStrength.weakness(of: weak) != nil, "\(weak) passed")
        }
        var generator = SeededGenerator(seed: 7)
        let base64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        let hex = Array("0123456789abcdef")
        for _ in 0..<200 {
            let random = String((0..<32).map { _ in base64.randomElement(using: &generator)! })
            #expect(SecretStrength.weakness(of: random) == nil, "random base64 \(random) called weak")
            let digits = String((0..<32).map { _ in hex.randomElement(using: &generator)! })
            #expect(SecretStrength.weakness(of: digits) == nil, "random hex \(digits) called weak")
        }
        #expect(SecretStrength.weakness(of: "correct horse battery staple 42!") == nil)
    }

    @Test func aLongButWeakClusterSecretIsWarnedAbout() throws {
        let weak = try config(["cluster": ["secret": String(repeating: "a", count: 40)]])
        #expect(weak.warnings.contains { $0.hasPrefix("cluster.secret has only 1 distinct character(s)") },
                "\(weak.warnings)")
        #expect(!weak.warnings.joined().contains("aaaa"), "the secret itself is not repeated in the warning")
        let strong = try config(["cluster": ["secret": "q8Vh2LrX0pZt7mWc9bNf3sYd1kJg6aRe"]])
        #expect(strong.warnings.isEmpty, "\(strong.warnings)")
    }

    @Test func brokerCertificatesNotCheckedAreWarnedAbout() throws {
        let off = try config(["mqtt": ["url": "mqtts://broker.example", "tls": ["verify": "false"]]])
        #expect(off.warnings.contains { $0.hasPrefix("mqtt.tls.verify is false") }, "\(off.warnings)")
        #expect(try config(["mqtt": ["url": "mqtts://broker.example"]]).warnings.isEmpty)
    }

    @Test func passwordsInTheClearBeyondThisMachineAreWarnedAbout() throws {
        let remote = try config(["mqtt": ["url": "mqtt://10.0.0.5", "username": "bridge", "password": "s3cret"],
                                 "devices": ["mqtt": ["url": "mqtt://zigbee:hunter2@192.168.1.20:1884"]]])
        #expect(remote.warnings.contains { $0.hasPrefix("mqtt.url mqtt://10.0.0.5:1883 is plain mqtt://") },
                "\(remote.warnings)")
        #expect(remote.warnings.contains { $0.hasPrefix("devices.mqtt.url mqtt://192.168.1.20:1884 is plain") },
                "\(remote.warnings)")
        #expect(!remote.warnings.joined().contains("hunter2") && !remote.warnings.joined().contains("s3cret"))
        for quiet in [["url": "mqtt://127.0.0.1", "username": "bridge", "password": "s3cret"],
                      ["url": "mqtt://localhost", "username": "bridge", "password": "s3cret"],
                      ["url": "mqtts://10.0.0.5", "username": "bridge", "password": "s3cret"],
                      ["url": "mqtt://10.0.0.5"]] {
            #expect(try config(["mqtt": quiet]).warnings.isEmpty, "\(quiet)")
        }
    }

    @Test func systemFoldersAsTheWebRootAreFound() {
        for folder in ["/", "/etc", "/root", "/home", "/usr", "/var", "/etc/ssh", "/proc/self", "/home/alice", "/tmp"] {
            #expect(BridgeConfiguration.HTTP.isSystemFolder(folder), "\(folder)")
        }
        for folder in ["/srv/bridge/web", "/home/alice/smarthome/web", "/usr/share/smarthome-bridge/web", "/opt/b/web",
                       "/web", "/nonexistent-web"] {
            #expect(!BridgeConfiguration.HTTP.isSystemFolder(folder), "\(folder)")
        }
    }

    @Test func userInfoInBrokerURLsIsUsedAndNeverShown() throws {
        let url = try BrokerURL.parse("mqtt://bridge:p%40ss/w:rd@broker.example:1884").get()
        #expect(url.host == "broker.example" && url.port == 1884)
        #expect(url.username == "bridge" && url.password == "p@ss/w:rd")
        #expect(url.description == "mqtt://broker.example:1884")
        let configured = try config(["mqtt": ["url": "mqtt://bridge:hunter2@127.0.0.1"]])
        #expect(configured.mqtt.username == "bridge" && configured.mqtt.password == "hunter2")
        for bad in ["tcp://bridge:hunter2@h", "mqtt://bridge:hunter2@", "mqtt://:hunter2@h", "mqtt://bridge:hunter2@h:x",
                    "mqtt://bridge:hun/ter2@h/x", "bridge:hunter2@h"] {
            guard case .failure(let problem) = BrokerURL.parse(bad) else {
                Issue.record("\(bad) accepted")
                continue
            }
            #expect(!problem.message.contains("hunter2"), "\(problem.message)")
        }
        let issues: [ConfigIssue]
        do {
            _ = try config(["mqtt": ["url": "mqtt://bridge:hunter2@broker", "username": "other"]])
            issues = []
        } catch let problems as ConfigIssues {
            issues = problems.issues
        }
        #expect(issues.map(\.description).contains { $0.hasPrefix("mqtt.url: has a user name (user@) and mqtt.username") },
                "\(issues)")
        #expect(BrokerURL.redacted("mqtt://u:p/a@ss@h:1") == "mqtt://***@h:1")
    }
}
