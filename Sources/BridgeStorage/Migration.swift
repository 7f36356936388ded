/// One step of the schema, applied once, in order, at open. Never edit a released migration: add a
/// new one, so every existing database follows the same path.
///
/// Written once for both engines, in SQLite's column types (`TEXT`, `INTEGER`, `REAL`), which
/// `SQLDialect.ddl` maps on PostgreSQL; `postgres` replaces the statements there for a step that
/// must differ beyond types (README "PostgreSQL").
public struct Migration: Sendable {
    public var version: Int
    public var statements: [String]
    /// The statements on PostgreSQL when they differ; nil: `statements`.
    public var postgres: [String]?

    public init(version: Int, statements: [String], postgres: [String]? = nil) {
        self.version = version
        self.statements = statements
        self.postgres = postgres
    }

    /// The statements to run on `dialect`'s engine.
    public func statements(in dialect: SQLDialect) -> [String] {
        switch dialect {
        case .sqlite: statements
        case .postgres: (postgres ?? statements).map(dialect.ddl)
        }
    }

    /// Readings, sensors' last values and alarms.
    private static let version2 = [
        """
        CREATE TABLE readings (
            user_id TEXT NOT NULL,
            room_id TEXT NOT NULL,
            sensor TEXT NOT NULL,
            t REAL NOT NULL,
            value TEXT NOT NULL
        )
        """,
        "CREATE INDEX readings_by_sensor ON readings (user_id, room_id, sensor, t)",
        "CREATE INDEX readings_by_time ON readings (t)",
        """
        CREATE TABLE sensor_state (
            user_id TEXT NOT NULL,
            room_id TEXT NOT NULL,
            sensor TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (user_id, room_id, sensor)
        )
        """,
        """
        CREATE TABLE alarms (
            uuid TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            title TEXT NOT NULL,
            fire_date REAL NOT NULL,
            is_enabled INTEGER NOT NULL,
            repeats TEXT NOT NULL,
            action_room TEXT,
            action_lights TEXT,
            handled_through REAL NOT NULL,
            created_at REAL NOT NULL
        )
        """,
        "CREATE INDEX alarms_by_user ON alarms (user_id)",
        """
        CREATE TABLE alarm_firings (
            id INTEGER PRIMARY KEY,
            uuid TEXT NOT NULL,
            occurrence REAL NOT NULL,
            fired_at REAL NOT NULL,
            skipped INTEGER NOT NULL
        )
        """,
    ]

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
        // History ordered by insertion as well as time: SQLite's row id, an identity column on PostgreSQL.
        Migration(version: 2, statements: version2,
                  postgres: version2 + ["ALTER TABLE readings ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY"]),
        // Signed tokens replace stored sessions (tokens issued before this version stop working):
        // what is kept now is the signing key when there is no `cluster.secret`, and revocations.
        Migration(version: 3, statements: [
            "DROP TABLE sessions",
            "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE revoked_sessions (id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL)",
        ]),
        // The discovery configs the bridge announced (AnnouncedConfigStore).
        Migration(version: 4, statements: ["CREATE TABLE announced_configs (topic TEXT PRIMARY KEY)"]),
        // Weekly alarms' days and alarms relative to the sun (README "Alarms").
        Migration(version: 5, statements: [
            "ALTER TABLE alarms ADD COLUMN days TEXT",
            "ALTER TABLE alarms ADD COLUMN sun_event TEXT",
            "ALTER TABLE alarms ADD COLUMN sun_offset REAL",
        ]),
        // Watchdogs with their episode's state, which survives restarts (README "Watchdogs").
        Migration(version: 6, statements: [
            """
            CREATE TABLE watchdogs (
                uuid TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                title TEXT NOT NULL,
                room TEXT NOT NULL,
                sensor TEXT NOT NULL,
                condition TEXT NOT NULL,
                value REAL,
                duration REAL NOT NULL,
                quiet_from INTEGER,
                quiet_to INTEGER,
                is_enabled INTEGER NOT NULL,
                phase TEXT NOT NULL,
                fired_at REAL,
                breach_since REAL,
                armed_at REAL NOT NULL
            )
            """,
            "CREATE INDEX watchdogs_by_user ON watchdogs (user_id)",
        ]),
        // Guests: tokens for some of a user's rooms until a time (README "Guests", GuestStore).
        Migration(version: 7, statements: [
            """
            CREATE TABLE guests (
                id TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                rooms TEXT NOT NULL,
                access TEXT NOT NULL,
                expires_at INTEGER NOT NULL,
                created_at INTEGER NOT NULL
            )
            """,
            "CREATE INDEX guests_by_user ON guests (user_id)",
        ]),
        // Users an admin made through the API (README "Admins and unbound devices", UserStore).
        Migration(version: 8, statements: [
            """
            CREATE TABLE api_users (
                id TEXT PRIMARY KEY,
                username TEXT NOT NULL UNIQUE,
                password_hash TEXT NOT NULL,
                admin INTEGER NOT NULL,
                created_at INTEGER NOT NULL
            )
            """,
        ]),
        // Rooms made through the API or MQTT requests, loaded beside the config file's (README,
        // "Managing the home"); `position` keeps them in the order they were made.
        Migration(version: 9, statements: [
            """
            CREATE TABLE managed_rooms (
                user_id TEXT NOT NULL,
                room_id TEXT NOT NULL,
                name TEXT NOT NULL,
                sensors TEXT NOT NULL,
                position INTEGER NOT NULL,
                PRIMARY KEY (user_id, room_id)
            )
            """,
        ]),
        // When the scheduler next has to look at an alarm (NULL: not worked out yet), so it reads
        // only the alarms due soon (README "Alarms", "Limits and pages").
        Migration(version: 10, statements: [
            "ALTER TABLE alarms ADD COLUMN next_check REAL",
            "CREATE INDEX alarms_by_next_check ON alarms (is_enabled, next_check)",
        ]),
        // The discovery configs announced, per cluster instance: instances sharing a PostgreSQL
        // database each keep their own (AnnouncedConfigStore).
        Migration(version: 11, statements: [
            "CREATE TABLE announced_topics (instance INTEGER NOT NULL, topic TEXT NOT NULL, PRIMARY KEY (instance, topic))",
            "INSERT INTO announced_topics (instance, topic) SELECT 0, topic FROM announced_configs",
            "DROP TABLE announced_configs",
        ]),
        // Leases on users' ownership and instances' heartbeats, for instances sharing PostgreSQL
        // (LeaseStore; docs/scaling.md, "Leases").
        Migration(version: 12, statements: [
            """
            CREATE TABLE user_leases (
                user_id TEXT PRIMARY KEY,
                instance INTEGER NOT NULL,
                epoch INTEGER NOT NULL,
                expires_at REAL NOT NULL
            )
            """,
            "CREATE TABLE cluster_instances (instance INTEGER NOT NULL PRIMARY KEY, expires_at REAL NOT NULL)",
        ]),
        // A reading is recorded once (README, "PostgreSQL"): a history batch written again after its
        // connection broke during COMMIT adds nothing. The sensor's time index becomes unique over
        // the whole reading; copies already recorded are dropped first, the oldest row kept.
        Migration(version: 13, statements: [
            """
            DELETE FROM readings WHERE rowid NOT IN
                (SELECT min(rowid) FROM readings GROUP BY user_id, room_id, sensor, t, value)
            """,
            "DROP INDEX readings_by_sensor",
            "CREATE UNIQUE INDEX readings_by_sensor ON readings (user_id, room_id, sensor, t, value)",
        ], postgres: [
            """
            DELETE FROM readings a USING readings b
            WHERE a.rowid > b.rowid AND a.user_id = b.user_id AND a.room_id = b.room_id AND a.sensor = b.sensor
                AND a.t = b.t AND a.value = b.value
            """,
            "DROP INDEX readings_by_sensor",
            "CREATE UNIQUE INDEX readings_by_sensor ON readings (user_id, room_id, sensor, t, value)",
        ]),
    ]
}
