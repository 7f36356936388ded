/// mosquitto's own access control for the bridge's topics (README, "MQTT accounts (mosquitto-acl)"): one MQTT account
/// per configured user, confined to `<base>/<userID>/#`, plus one for the bridge itself.
///
/// This is the pure part of `smarthome-bridge mosquitto-acl`: which accounts exist, the text of
/// mosquitto's `acl_file`, the passwords file it reads, and which password each account gets.
/// Hashing and writing files happen elsewhere.
public struct MosquittoAccessControl: Sendable, Equatable {
    /// The bridge's account name when `mqtt.username` is not set.
    public static let defaultBridgeUsername = "smarthome-bridge"

    /// One MQTT account in the broker's password file.
    public struct Account: Sendable, Equatable {
        public enum Role: Sendable, Equatable {
            /// The bridge's own account: everything under the base topic and the Home Assistant prefix.
            case bridge
            /// A configured user's account: only that user's topics.
            case user(id: String)
        }

        /// The MQTT username (a user's `username`, or the bridge's `mqtt.username`).
        public var name: String
        public var role: Role

        public init(name: String, role: Role) {
            self.name = name
            self.role = role
        }
    }

    /// One line of an ACL: `topic <access> <topic>`.
    public struct Rule: Sendable, Equatable {
        public enum Access: String, Sendable {
            case read, write, readwrite
        }

        public var access: Access
        public var topic: String

        public init(_ access: Access, _ topic: String) {
            self.access = access
            self.topic = topic
        }
    }

    /// An account name and its password in clear text (never written anywhere but standard output).
    public struct Credential: Sendable, Equatable {
        public var name: String
        public var password: String

        public init(name: String, password: String) {
            self.name = name
            self.password = password
        }
    }

    public var topics: Topics
    public var homeAssistantPrefix: String
    /// `homie.prefix` when Homie is on (README, "Homie").
    public var homiePrefix: String?
    /// The bridge's account first, then one per user in the config's order.
    public var accounts: [Account]
    /// The ids of users with `admin: true`: they may also publish bridge requests and read the
    /// answers (README, "Managing the home").
    public var admins: Set<String>

    /// - Parameters:
    ///   - bridgeUsername: `mqtt.username`; `nil` gives `smarthome-bridge`.
    ///   - homiePrefix: `homie.prefix` when `homie.enabled`: the bridge's account may write there too.
    public init(baseTopic: String, homeAssistantPrefix: String, bridgeUsername: String?, users: [User],
                homiePrefix: String? = nil) {
        topics = Topics(base: baseTopic)
        self.homeAssistantPrefix = homeAssistantPrefix
        self.homiePrefix = homiePrefix
        accounts = [Account(name: bridgeUsername ?? Self.defaultBridgeUsername, role: .bridge)]
            + users.map { Account(name: $0.username, role: .user(id: $0.id)) }
        admins = Set(users.filter(\.isAdmin).map(\.id))
    }

    /// The accounts of a loaded configuration.
    public init(configuration: BridgeConfiguration) {
        self.init(baseTopic: configuration.mqtt.baseTopic, homeAssistantPrefix: configuration.homeAssistant.prefix,
                  bridgeUsername: configuration.mqtt.username, users: configuration.users,
                  homiePrefix: configuration.homie.enabled ? configuration.homie.prefix : nil)
    }

    /// The bridge's own account.
    public var bridgeAccount: Account { accounts[0] }

    // MARK: Checks

    /// Why the accounts cannot be written into mosquitto's files, one message per problem: a name
    /// used twice (a user named like the bridge's account), or one that mosquitto's file formats
    /// cannot hold (a `:`, a line break, blanks at either end).
    public func problems() -> [String] {
        var problems: [String] = []
        var seen: Set<String> = []
        for account in accounts {
            let what = account.role == .bridge ? "the bridge's MQTT account" : "user \"\(account.name)\""
            if !seen.insert(account.name).inserted {
                problems.append("\(what): the MQTT username \"\(account.name)\" is used by another account "
                    + "(set mqtt.username to a name no user has)")
            }
            if account.name.isEmpty {
                problems.append("\(what): the MQTT username is empty")
            } else if account.name.contains(":") {
                problems.append("\(what): the MQTT username \"\(account.name)\" contains a colon, "
                    + "which mosquitto's password file cannot hold")
            } else if account.name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                problems.append("\(what): the MQTT username contains a line break or control character")
            } else if account.name.first?.isWhitespace == true || account.name.last?.isWhitespace == true {
                problems.append("\(what): the MQTT username \"\(account.name)\" starts or ends with a blank, "
                    + "which mosquitto's acl_file drops")
            }
        }
        for topic in [topics.base, homeAssistantPrefix]
        where topic.first?.isWhitespace == true || topic.last?.isWhitespace == true
            || topic.unicodeScalars.contains(where: { $0.value < 0x20 }) {
            problems.append("the topic \"\(topic)\" starts or ends with a blank or holds a control character, "
                + "which mosquitto's acl_file cannot hold")
        }
        return problems
    }

    // MARK: The ACL

    /// What an account may do: a user reads everything under `<base>/<userID>/#` and writes only its
    /// own light commands (its rooms', every light's, its groups': README, "Groups"), an admin also
    /// writes bridge requests and reads their answers; the bridge reads and writes its base topic,
    /// the Home Assistant prefix and, with Homie, Homie's prefix.
    public func rules(for account: Account) -> [Rule] {
        switch account.role {
        case .bridge:
            [Rule(.readwrite, "\(topics.base)/#"), Rule(.readwrite, "\(homeAssistantPrefix)/#")]
                + (homiePrefix.map { [Rule(.readwrite, "\($0)/#")] } ?? [])
        case .user(let id):
            [Rule(.read, "\(topics.base)/\(id)/#"), Rule(.write, topics.lightsSet(user: id, room: "+")),
             Rule(.write, topics.userLightsSet(user: id)), Rule(.write, topics.groupSet(user: id, group: "+"))]
                + (admins.contains(id) ? [Rule(.write, topics.bridgeRequests), Rule(.read, topics.bridgeResponse("#"))] : [])
        }
    }

    /// The `acl_file` text: a comment header, then a `user` block per account. mosquitto denies
    /// everything not listed, anonymous clients included.
    /// - Parameters:
    ///   - command: the command line that made the file, named in the header.
    public func aclText(generatedBy command: String) -> String {
        var lines = [
            "# mosquitto acl_file for SmartHomeBridge, generated by `\(command)`.",
            "# Do not edit: run the command again after changing users, mqtt.username, mqtt.base_topic",
            "# or homeassistant.prefix, then reload mosquitto (SIGHUP).",
            "# Each user may read \(topics.base)/<userID>/# and publish only its own light commands;",
            "# admins (users[].admin) may also publish \(topics.bridgeRequests) and read \(topics.bridgeResponse("#"));",
            "# the bridge's account may read and write \(topics.base)/# and \(homeAssistantPrefix)/#"
                + (homiePrefix.map { " (and \($0)/#, Homie's)." } ?? "."),
            "# Anything not listed is denied.",
        ]
        for account in accounts {
            lines.append("")
            switch account.role {
            case .bridge: lines.append("# the bridge itself")
            case .user(let id): lines.append("# userID \(id)")
            }
            lines.append("user \(account.name)")
            for rule in rules(for: account) {
                lines.append("topic \(rule.access.rawValue) \(rule.topic)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The `password_file` text: `name:hash` lines in account order, nothing else, so that
    /// `mosquitto_passwd` can keep editing the file.
    /// - Parameters:
    ///   - hashes: each account's hash in mosquitto's format, by account name.
    public func passwordFileText(hashes: [String: String]) -> String {
        accounts.compactMap { account in hashes[account.name].map { "\(account.name):\($0)\n" } }.joined()
    }

    // MARK: Passwords

    /// Which password each account gets, and what the command should tell about it.
    public struct PasswordAssignment: Sendable, Equatable {
        /// Every account's password, in account order.
        public var credentials: [Credential]
        /// The accounts whose password was generated, in account order: shown once, then lost.
        public var generated: [Credential]
        /// Entries of the passwords file that name no account (a typo, or a user since removed).
        public var unknown: [PasswordList.Entry]
        /// Whether the passwords file had an entry for the bridge that the config's password overrode.
        public var bridgeEntryOverridden: Bool
    }

    /// Picks each account's password: for the bridge `mqtt.password` (or the content of
    /// `mqtt.password_file`) when the config has one, else the passwords file's entry; for a user
    /// the passwords file's entry; and `generate()` for any account still without one.
    /// - Parameters:
    ///   - list: the parsed `--passwords` file (empty when none was given).
    ///   - bridgePassword: the bridge's password from the config, if it sets one.
    ///   - generate: a new random password; injected so tests need no randomness.
    public func assignPasswords(
        from list: PasswordList, bridgePassword: String?, generate: () -> String
    ) -> PasswordAssignment {
        var credentials: [Credential] = []
        var generated: [Credential] = []
        var overridden = false
        for account in accounts {
            let listed = list.password(for: account.name)
            var password: String
            if account.role == .bridge, let bridgePassword {
                password = bridgePassword
                overridden = listed != nil
            } else if let listed {
                password = listed
            } else {
                password = generate()
                generated.append(Credential(name: account.name, password: password))
            }
            credentials.append(Credential(name: account.name, password: password))
        }
        let names = Set(accounts.map(\.name))
        return PasswordAssignment(credentials: credentials, generated: generated,
                                  unknown: list.entries.filter { !names.contains($0.name) },
                                  bridgeEntryOverridden: overridden)
    }

    /// The `--passwords` file: `name:password` lines; blank lines and lines starting with `#` are
    /// ignored. The name ends at the first colon, and everything after it, blanks included, is the
    /// password. Lines may end in `\n` or `\r\n`.
    public struct PasswordList: Sendable, Equatable {
        public struct Entry: Sendable, Equatable {
            public var name: String
            public var password: String
            /// 1-based line in the file.
            public var line: Int

            public init(name: String, password: String, line: Int) {
                self.name = name
                self.password = password
                self.line = line
            }
        }

        /// A line that is not `name:password`. The message names the line but never repeats its
        /// text, which may hold a password.
        public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
            public var line: Int
            public var message: String

            public var description: String { "line \(line): \(message)" }
        }

        public var entries: [Entry]

        public init(entries: [Entry] = []) {
            self.entries = entries
        }

        /// The password listed for `name`, if any.
        public func password(for name: String) -> String? {
            entries.first { $0.name == name }?.password
        }

        /// Parses the file's text; the first malformed line stops parsing.
        public static func parse(_ text: String) throws(ParseError) -> PasswordList {
            var entries: [Entry] = []
            // Splitting on newline Characters takes "\r\n" (one Character in Swift) as one break.
            for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let number = index + 1
                if line.allSatisfy(\.isWhitespace) || line.drop(while: \.isWhitespace).hasPrefix("#") { continue }
                guard let colon = line.firstIndex(of: ":") else {
                    throw ParseError(line: number, message: "expected name:password (no colon found)")
                }
                let name = String(line[..<colon]).trimmingBlanks()
                let password = String(line[line.index(after: colon)...])
                guard !name.isEmpty else {
                    throw ParseError(line: number, message: "expected name:password (the name is empty)")
                }
                guard !password.isEmpty else {
                    throw ParseError(line: number, message: "the password for \"\(name)\" is empty")
                }
                if let first = entries.first(where: { $0.name == name }) {
                    throw ParseError(line: number, message: "\"\(name)\" is listed twice (first on line \(first.line))")
                }
                entries.append(Entry(name: name, password: password, line: number))
            }
            return PasswordList(entries: entries)
        }
    }
}

extension String {
    /// The text without spaces and tabs at either end.
    fileprivate func trimmingBlanks() -> String {
        let blanks: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(drop(while: blanks).reversed().drop(while: blanks).reversed())
    }
}
