import BridgeCore
import Testing

@Suite struct StorageURLTests {
    @Test func parsesBothEnginesWithDefaults() throws {
        #expect(try StorageURL.parse("sqlite:///var/lib/bridge/bridge.sqlite").get() == .sqlite(path: "/var/lib/bridge/bridge.sqlite"))
        #expect(try StorageURL.parse("sqlite://./data/b.sqlite").get() == .sqlite(path: "./data/b.sqlite"))
        let server = try StorageURL.parse("postgres://bridge:p%40ss:w@db.local:6543/homes").get()
        #expect(server == .postgres(.init(user: "bridge", password: "p@ss:w", host: "db.local", port: 6543, database: "homes")))
        #expect(try StorageURL.parse("postgresql://bridge@[::1]/homes").get()
            == .postgres(.init(user: "bridge", password: nil, host: "::1", port: 5432, database: "homes")))
    }

    @Test func theDescriptionNeverShowsThePassword() throws {
        let url = try StorageURL.parse("postgres://bridge:hunter2@db:5432/homes").get()
        #expect(url.description == "postgres://bridge:***@db:5432/homes")
        #expect(url.isPostgres)
    }

    @Test func badURLsSayWhatIsWrongWithoutThePassword() {
        func problem(_ text: String) -> String? {
            if case .failure(let issue) = StorageURL.parse(text) { issue.message } else { nil }
        }
        #expect(problem("mysql://u:hunter2@db/x")?.contains("sqlite:// or postgres://") == true)
        #expect(problem("mysql://u:hunter2@db/x")?.contains("hunter2") == false)
        #expect(problem("postgres://db/homes")?.contains("needs a user") == true)
        #expect(problem("postgres://u:hunter2@db")?.contains("database name") == true)
        #expect(problem("postgres://u:hunter2@db:99999/homes")?.contains("port") == true)
        #expect(problem("sqlite://")?.contains("no file") == true)
    }
}
