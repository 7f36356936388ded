import BridgeCore
import Testing

/// Users an admin makes or changes through the API: every problem named, and the home finding them.
@Suite struct UserDraftTests {
    func parse(_ text: String, creating: Bool) -> Result<UserDraft, APIBody.Problem> {
        UserDraft.parse(Array(text.utf8), creating: creating)
    }

    @Test func aNewUserNeedsANameAndAPasswordAndMayBeAnAdmin() throws {
        #expect(try parse(#"{"username":"Zeynep","password":"12345678","admin":true}"#, creating: true).get()
            == UserDraft(username: "Zeynep", password: "12345678", isAdmin: true))
        guard case .failure(let problem) = parse(#"{"admin":1}"#, creating: true) else { Issue.record("accepted"); return }
        #expect(problem.message == #"field "username" is required; field "password" is required; "#
            + #"field "admin" must be true or false"#)
    }

    @Test func aChangeNamesSomethingToChangeAndNotTheName() {
        #expect((try? parse(#"{"admin":false}"#, creating: false).get()) == UserDraft(isAdmin: false))
        guard case .failure(let empty) = parse("{}", creating: false),
              case .failure(let renamed) = parse(#"{"username":"x"}"#, creating: false)
        else { Issue.record("accepted"); return }
        #expect(empty.message == #"nothing to change: give "password" or "admin""#)
        #expect(renamed.message.hasPrefix(#"field "username" is not known"#))
    }

    @Test func namesWithSpacesOrControlCharactersAreRefused() {
        for name in ["two words", " lead", "tab\tbed", String(repeating: "a", count: 65)] {
            #expect((try? parse(#"{"username":"\#(name)","password":"12345678"}"#, creating: true).get()) == nil, "\(name)")
        }
    }

    @Test func theHomeFindsUsersAfterTheyChange() {
        var home = Home(users: [User(id: "1", username: "a", passwordHash: "", rooms: [])])
        home.setUsers(home.users + [User(id: "u1", username: "b", passwordHash: "", rooms: [])])
        #expect(home.user(username: "b")?.id == "u1")
        home.setUsers(home.users.filter { $0.id != "u1" })
        #expect(home.user(id: "u1") == nil)
        #expect(home.user(id: "1")?.username == "a")
    }
}
