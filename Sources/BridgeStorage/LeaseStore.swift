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
        try database.execute(
            """
            INSERT INTO cluster_instances (instance, expires_at) VALUES (?, ?)
            ON CONFLICT (instance) DO UPDATE SET expires_at = excluded.expires_at
            """,
            [.integer(Int64(instance)), .real(until.timeIntervalSince1970)])
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

    /// Tries one step for `instance`; false when the stored lease moved on meanwhile (another
    /// instance took it first), in which case nothing changed.
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
            return try database.execute(
                "UPDATE user_leases SET expires_at = ? WHERE user_id = ? AND instance = ? AND epoch = ?",
                [until, .text(user), me, .integer(epoch)]) == 1
        case .release(let user, let epoch):
            return try database.execute(
                "UPDATE user_leases SET expires_at = 0 WHERE user_id = ? AND instance = ? AND epoch = ?",
                [.text(user), me, .integer(epoch)]) == 1
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
