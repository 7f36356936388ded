import BridgeCore
import Foundation

/// Leases on users' ownership and the instances' heartbeats (docs/scaling.md, "Leases"). Every
/// change is a compare-and-set on the stored epoch, so of two instances racing for one user only
/// one wins; `LeaseOwnership` decides which steps to try.
public struct LeaseStore: Sendable {
    private let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Marks `instance` live until `until`.
    public func heartbeat(instance: Int, until: Date) throws(StorageError) {
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            try LeaseStore.heartbeat(instance: instance, until: until, on: connection)
        }
    }

    /// The instances whose heartbeat runs at `now`.
    public func liveInstances(now: Date) throws(StorageError) -> Set<Int> {
        Set(try database.query("SELECT instance FROM cluster_instances WHERE expires_at > ?", [.real(now.timeIntervalSince1970)])
            .compactMap { $0.first?.integer.map(Int.init) })
    }

    /// The instance holding `user`'s lease at `now`, nil when nobody does.
    public func holder(of user: String, now: Date) throws(StorageError) -> Int? {
        try database.query("SELECT instance FROM user_leases WHERE user_id = ? AND expires_at > ?",
                           [.text(user), .real(now.timeIntervalSince1970)]).first?.first?.integer.map(Int.init)
    }

    /// Every stored lease, by user.
    public func leases() throws(StorageError) -> [String: LeaseOwnership.Lease] {
        var result: [String: LeaseOwnership.Lease] = [:]
        for row in try database.query("SELECT user_id, instance, epoch, expires_at FROM user_leases") {
            guard row.count == 4, let user = row[0].text, let instance = row[1].integer, let epoch = row[2].integer,
                  let expiry = row[3].real else { continue }
            result[user] = LeaseOwnership.Lease(user: user, instance: Int(instance), epoch: epoch, expiresAt: expiry)
        }
        return result
    }

    /// Users a renewal or hand-back statement names at most, so its bound values stay well under
    /// either engine's limit; more users take more statements in the same transaction.
    static let usersPerStatement = 400

    /// One lease round's upkeep in one transaction (docs/scaling.md, "Leases"): `instance`'s
    /// heartbeat until `until`, every lease it renews extended to `until` and every lease it hands
    /// back released, each set in one statement that matches a lease only at the held epoch and
    /// holder (so a lease another instance took meanwhile is left alone).
    /// - Parameters:
    ///   - renew: user → epoch of the leases to extend.
    ///   - release: user → epoch of the leases to hand back.
    /// - Returns: the users whose lease was renewed and those whose lease was handed back.
    public func keep(instance: Int, until: Date, renew: [String: Int64], release: [String: Int64])
        throws(StorageError) -> (renewed: Set<String>, released: Set<String>)
    {
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            try LeaseStore.heartbeat(instance: instance, until: until, on: connection)
            let renewed = try LeaseStore.setExpiry(until.timeIntervalSince1970, of: renew, instance: instance, on: connection)
            let released = try LeaseStore.setExpiry(0, of: release, instance: instance, on: connection)
            return (renewed, released)
        }
    }

    /// Sets the expiry of the leases `instance` holds at the given epochs; returns the users matched.
    private static func setExpiry(_ expiry: Double, of leases: [String: Int64], instance: Int,
                                  on connection: borrowing DatabaseConnection) throws(StorageError) -> Set<String> {
        var matched: Set<String> = []
        let sorted = leases.sorted { $0.key < $1.key }
        var start = 0
        while start < sorted.count {
            let chunk = sorted[start..<min(start + usersPerStatement, sorted.count)]
            start += chunk.count
            // Pairs as ORed conditions: both engines type each `?` from its column there.
            let pairs = Array(repeating: "(user_id = ? AND epoch = ?)", count: chunk.count).joined(separator: " OR ")
            var bindings: [SQLValue] = [.real(expiry), .integer(Int64(instance))]
            for (user, epoch) in chunk { bindings += [.text(user), .integer(epoch)] }
            for row in try connection.query(
                "UPDATE user_leases SET expires_at = ? WHERE instance = ? AND (\(pairs)) RETURNING user_id", bindings) {
                if let user = row.first?.text { matched.insert(user) }
            }
        }
        return matched
    }

    private static func heartbeat(instance: Int, until: Date, on connection: borrowing DatabaseConnection)
        throws(StorageError) {
        try connection.execute(
            """
            INSERT INTO cluster_instances (instance, expires_at) VALUES (?, ?)
            ON CONFLICT (instance) DO UPDATE SET expires_at = excluded.expires_at
            """,
            [.integer(Int64(instance)), .real(until.timeIntervalSince1970)])
    }

    /// Tries one step for `instance`; false when the stored lease moved on meanwhile (another
    /// instance took it first), in which case nothing changed. A round's renewals and hand-backs
    /// go through `keep` instead, all in one transaction.
    public func apply(_ step: LeaseOwnership.Step, instance: Int, now: Date, duration: Double) throws(StorageError) -> Bool {
        let me = SQLValue.integer(Int64(instance))
        let until = SQLValue.real(now.timeIntervalSince1970 + duration)
        switch step {
        case .acquire(let user, let epoch) where epoch == 1:
            return try database.execute(
                "INSERT INTO user_leases (user_id, instance, epoch, expires_at) VALUES (?, ?, 1, ?) ON CONFLICT DO NOTHING",
                [.text(user), me, until]) == 1
        case .acquire(let user, let epoch):
            return try database.execute(
                """
                UPDATE user_leases SET instance = ?, epoch = ?, expires_at = ?
                WHERE user_id = ? AND epoch = ? AND expires_at <= ?
                """,
                [me, .integer(epoch), until, .text(user), .integer(epoch - 1), .real(now.timeIntervalSince1970)]) == 1
        case .renew(let user, let epoch):
            return try setExpiry(now.timeIntervalSince1970 + duration, of: user, epoch: epoch, instance: instance)
        case .release(let user, let epoch):
            return try setExpiry(0, of: user, epoch: epoch, instance: instance)
        }
    }

    private func setExpiry(_ expiry: Double, of user: String, epoch: Int64, instance: Int) throws(StorageError) -> Bool {
        try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) -> Bool in
            !(try LeaseStore.setExpiry(expiry, of: [user: epoch], instance: instance, on: connection).isEmpty)
        }
    }
}

/// A lease a write is fenced by: the write happens only while `instance` still holds `user`'s
/// lease at `epoch`, checked in the write's own transaction.
public struct LeaseFence: Sendable, Equatable {
    public var user: String
    public var instance: Int
    public var epoch: Int64

    public init(user: String, instance: Int, epoch: Int64) {
        self.user = user
        self.instance = instance
        self.epoch = epoch
    }

    /// Whether the lease is still held at `now`. On PostgreSQL the row is locked until the
    /// transaction ends, so no takeover commits between this check and the write; SQLite's
    /// transactions already hold the file's write lock.
    func holds(_ connection: borrowing DatabaseConnection, now: Date) throws(StorageError) -> Bool {
        let lock = connection.dialect == .postgres ? " FOR UPDATE" : ""
        return !(try connection.query(
            "SELECT 1 FROM user_leases WHERE user_id = ? AND instance = ? AND epoch = ? AND expires_at > ?" + lock,
            [.text(user), .integer(Int64(instance)), .integer(epoch), .real(now.timeIntervalSince1970)]).isEmpty)
    }
}
