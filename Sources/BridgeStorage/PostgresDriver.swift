import BridgeCore
import CPostgres
import Foundation

/// The PostgreSQL driver over libpq: parameters sent apart from the SQL text (never spliced into
/// it), results read as text and typed by their column's type.
///
/// A lost connection (the server restarted, a network blip) is reopened by the next statement:
/// one attempt per statement at most, and after a failed attempt none until a back-off has passed
/// (`reconnectDelays`, then every 2 s), so a statement never waits on a dead server longer than one
/// connect (`connect_timeout`) while holding `Database`'s lock: the bridge's other work goes on,
/// and callers retry (the history writer keeps its batch). Once reopened, a statement outside a
/// transaction is run again once, and `Database.transaction` runs a transaction again once when
/// the connection was lost before its `COMMIT` was sent. Errors name the server, password redacted.
final class PostgresDriver: SQLDriver {
    private var raw: OpaquePointer
    private let server: StorageURL.Postgres
    private var inTransaction = false
    /// Failed reconnect attempts in a row, and when the next may be made.
    private var failedReconnects = 0
    private var nextReconnect = ContinuousClock.now

    /// The waits after the 1st, 2nd, ... failed attempt in a row; the last repeats.
    static let reconnectDelays: [Duration] = [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)]

    var dialect: SQLDialect { .postgres }

    /// Where errors say they happened: the URL without its password.
    private var name: String { StorageURL.postgres(server).description }

    init(server: StorageURL.Postgres) throws(StorageError) {
        self.server = server
        raw = try Self.connect(server)
    }

    deinit { PQfinish(raw) }

    private static func connect(_ server: StorageURL.Postgres) throws(StorageError) -> OpaquePointer {
        var settings: [(String, String)] = [
            ("host", server.host), ("port", String(server.port)), ("user", server.user), ("dbname", server.database),
            ("connect_timeout", "2"), ("application_name", "smarthome-bridge"),
            // Notices ("already exists, skipping") would otherwise go to stderr unformatted.
            ("options", "-c client_min_messages=warning"),
        ]
        if let password = server.password { settings.append(("password", password)) }
        let keywords = settings.map { strdup($0.0) } + [nil]
        let values = settings.map { strdup($0.1) } + [nil]
        defer { (keywords + values).forEach { free($0) } }
        let connection = keywords.map { UnsafePointer($0) }.withUnsafeBufferPointer { keys in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { PQconnectdbParams(keys.baseAddress, $0.baseAddress, 0) }
        }
        guard let connection else {
            throw StorageError(postgres: "open \(StorageURL.postgres(server))", message: "out of memory", sqlState: nil,
                               connectionLost: true)
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw StorageError(postgres: "open \(StorageURL.postgres(server))", message: message, sqlState: nil,
                               connectionLost: true)
        }
        return connection
    }

    private static func trimmed(_ text: UnsafePointer<CChar>?) -> String {
        text.map { String(cString: $0) }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown error"
    }

    /// One attempt to reopen the connection, unless the back-off after the last failed one still runs.
    private func reconnect() throws(StorageError) {
        let now = ContinuousClock.now
        guard now >= nextReconnect else {
            throw StorageError(postgres: "reconnect to \(name)",
                               message: "the connection is lost; \(failedReconnects) attempts to reopen it failed, "
                                   + "the next is due in \(Self.milliseconds(nextReconnect - now)) ms",
                               sqlState: nil, connectionLost: true)
        }
        PQreset(raw)
        if PQstatus(raw) == CONNECTION_OK {
            failedReconnects = 0
            return
        }
        failedReconnects += 1
        nextReconnect = now + Self.reconnectDelays[min(failedReconnects, Self.reconnectDelays.count) - 1]
        throw StorageError(postgres: "reconnect to \(name)",
                           message: "the connection is lost and attempt \(failedReconnects) to reopen it failed: "
                               + Self.trimmed(PQerrorMessage(raw)),
                           sqlState: nil, connectionLost: true)
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    func execute(_ sql: String, _ bindings: [SQLValue]) throws(StorageError) -> Int {
        let result = try run(sql, bindings)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    func query(_ sql: String, _ bindings: [SQLValue]) throws(StorageError) -> [[SQLValue]] {
        let result = try run(sql, bindings)
        defer { PQclear(result) }
        let columns = PQnfields(result)
        let types = (0..<columns).map { PQftype(result, $0) }
        return (0..<PQntuples(result)).map { row in
            (0..<columns).map { column in
                PQgetisnull(result, row, column) != 0
                    ? .null : PostgresText.value(String(cString: PQgetvalue(result, row, column)), type: types[Int(column)])
            }
        }
    }

    func executeOnce(_ sql: String) throws(StorageError) { _ = try execute(sql, []) }

    func begin() throws(StorageError) {
        _ = try execute("BEGIN", [])
        inTransaction = true
    }

    func commit() throws(StorageError) {
        defer { inTransaction = false }
        _ = try execute("COMMIT", [])
    }

    func rollback() {
        inTransaction = false
        if PQstatus(raw) == CONNECTION_OK { _ = try? execute("ROLLBACK", []) }
    }

    func schemaVersion() throws(StorageError) -> Int {
        guard try query("SELECT to_regclass('bridge_schema') IS NOT NULL", []).first?.first?.integer == 1 else { return 0 }
        return Int(try query("SELECT max(version) FROM bridge_schema", []).first?.first?.integer ?? 0)
    }

    /// Instances starting together against a new database migrate one after the other: the first
    /// holds this lock for its transaction, the next then finds the schema already up to date.
    func lockSchema() throws(StorageError) {
        _ = try query("SELECT pg_advisory_xact_lock(4201740522)", [])
        try executeOnce("CREATE TABLE IF NOT EXISTS bridge_schema (version BIGINT NOT NULL)")
    }

    func setSchemaVersion(_ version: Int) throws(StorageError) {
        try executeOnce("DELETE FROM bridge_schema")
        _ = try execute("INSERT INTO bridge_schema (version) VALUES (?)", [.integer(Int64(version))])
    }

    /// Runs one statement, reconnecting first when the connection is down and no transaction is
    /// open; a statement lost with the connection outside a transaction is run once more.
    private func run(_ sql: String, _ bindings: [SQLValue]) throws(StorageError) -> OpaquePointer {
        let text = PostgresText.numberingPlaceholders(sql)
        if PQstatus(raw) != CONNECTION_OK, !inTransaction || sql == "BEGIN" { try reconnect() }
        do {
            return try runOnce(text, bindings)
        } catch where error.connectionLost && !inTransaction {
            try reconnect()
            return try runOnce(text, bindings)
        }
    }

    private func runOnce(_ text: String, _ bindings: [SQLValue]) throws(StorageError) -> OpaquePointer {
        let values = bindings.map { PostgresText.parameter($0).map { strdup($0) } ?? nil }
        defer { values.forEach { free($0) } }
        let result = values.map { UnsafePointer($0) }.withUnsafeBufferPointer {
            PQexecParams(raw, text, Int32(values.count), nil, $0.baseAddress, nil, nil, 0)
        }
        let status = result.map(PQresultStatus)
        if let result, status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK { return result }
        let message = result.map { Self.trimmed(PQresultErrorMessage($0)) } ?? Self.trimmed(PQerrorMessage(raw))
        let sqlState = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
        if let result { PQclear(result) }
        let lost = PQstatus(raw) != CONNECTION_OK
        throw StorageError(postgres: lost ? "run on \(name)" : "run \(text.prefix(60))",
                           message: message.isEmpty ? "no answer from the server" : message,
                           sqlState: lost ? nil : sqlState, connectionLost: lost)
    }
}
