/// One step of the schema, applied once, in order, at open. Never edit a released migration: add a
/// new one, so every existing database file follows the same path.
public struct Migration: Sendable {
    public var version: Int
    public var statements: [String]

    public init(version: Int, statements: [String]) {
        self.version = version
        self.statements = statements
    }

    public static let all: [Migration] = [
        Migration(version: 1, statements: [
            """
            CREATE TABLE sessions (
                token_hash TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                created_at REAL NOT NULL,
                expires_at REAL NOT NULL
            )
            """,
            "CREATE INDEX sessions_expiry ON sessions (expires_at)",
        ]),
    ]
}
