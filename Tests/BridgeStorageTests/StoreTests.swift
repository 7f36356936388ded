import BridgeCore
import BridgeStorage
import Foundation
import Testing

/// Every store and migration, with the same assertions on SQLite and on a real PostgreSQL
/// (README "PostgreSQL").
@Suite struct StoreTests {
    @Test(arguments: Engine.allCases) func opensWithTheSchemaMigrated(engine: Engine) throws {
        let database = try TestDatabase(engine).open()
        #expect(database.schemaVersion == Migration.all.last?.version)
        let tables = try TestDatabase.tables(database)
        for table in ["revoked_sessions", "settings", "readings", "sensor_state", "alarms", "alarm_firings", "watchdogs",
                      "announced_topics"] {
            #expect(tables.contains(table), "\(table)")
        }
        #expect(!tables.contains("sessions"), "stored sessions gave way to signed tokens")
    }

    @Test(arguments: Engine.allCases) func migrationsRunOnceAndOnlyForward(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let first = [Migration(version: 1, statements: ["CREATE TABLE a (x TEXT)"])]
        _ = try test.open(migrations: first)
        let second = first + [Migration(version: 2, statements: ["CREATE TABLE b (y TEXT)"])]
        let database = try test.open(migrations: second)  // would fail if version 1 ran again
        #expect(database.schemaVersion == 2)
        _ = try test.open(migrations: second)
    }

    @Test(arguments: Engine.allCases) func aFailingMigrationLeavesNothingHalfDone(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let broken = [Migration(version: 1, statements: ["CREATE TABLE a (x TEXT)", "NOT SQL AT ALL"])]
        do {
            _ = try test.open(migrations: broken)
            Issue.record("a broken migration was applied")
        } catch {
            #expect(error.context.contains("migrate to version 1"), "\(error)")
        }
        let database = try test.open(migrations: [])
        #expect(database.schemaVersion == 0)
        #expect(try !TestDatabase.tables(database).contains("a"))
    }

    /// A step may differ per engine; the other engine's text never runs.
    @Test(arguments: Engine.allCases) func aMigrationRunsItsOwnEnginesStatements(engine: Engine) throws {
        let step = Migration(version: 1, statements: ["CREATE TABLE on_sqlite (x TEXT)"],
                             postgres: ["CREATE TABLE on_postgres (x REAL)"])
        let database = try TestDatabase(engine).open(migrations: [step])
        #expect(try TestDatabase.tables(database) == [engine == .sqlite ? "on_sqlite" : "on_postgres"])
    }

    @Test(arguments: Engine.allCases) func watchdogsKeepTheirFieldsAndEpisodeAcrossReopeningAndAnEditRearmsThem(
        engine: Engine) throws
    {
        let test = try TestDatabase(engine)
        let armed = Date(timeIntervalSince1970: 1_796_083_200.125)
        let watchdog = Watchdog(uuid: "w1", userID: "1", title: "Warm", room: "bedroom", sensor: .temperature,
                                condition: .above, value: 28.5, duration: 1800,
                                quiet: Watchdog.QuietHours(from: 22 * 60, to: 7 * 60))
        do {
            let store = WatchdogStore(database: try test.open())
            try store.insert(watchdog, now: armed)
            let fired = WatchdogState(phase: .fired, firedAt: armed.addingTimeInterval(60),
                                      breachSince: armed.addingTimeInterval(10), armedAt: armed)
            try store.save(fired, uuid: "w1")
        }
        let store = WatchdogStore(database: try test.open())
        let (kept, state) = try #require(try store.watchdog(uuid: "w1", userID: "1"))
        #expect(kept == watchdog)
        #expect(state.phase == .fired && state.firedAt == armed.addingTimeInterval(60)
            && state.breachSince == armed.addingTimeInterval(10), "times kept to the fraction of a second")
        #expect(try store.watchdog(uuid: "w1", userID: "2") == nil, "another user's watchdog")
        #expect(try store.count(userID: "1") == 1)
        #expect(try store.update(watchdog, now: armed.addingTimeInterval(99)))
        let (_, rearmed) = try #require(try store.watchdog(uuid: "w1", userID: "1"))
        #expect(rearmed == WatchdogState(armedAt: armed.addingTimeInterval(99)))
        #expect(try store.delete(uuid: "w1", userID: "2") == false)
        #expect(try store.delete(uuid: "w1", userID: "1"))
        #expect(try store.enabled().isEmpty)
    }

    @Test(arguments: Engine.allCases) func alarmsKeepTheirFieldsAndAFiringIsRecordedWithItsBookkeeping(
        engine: Engine) throws
    {
        let store = AlarmStore(database: try TestDatabase(engine).open())
        let now = Date(timeIntervalSince1970: 1_796_083_200.5)
        let weekly = Alarm(uuid: "a1", userID: "1", title: "Wake", fireDate: now.addingTimeInterval(3600), isEnabled: true,
                           repeats: .weekly, action: Alarm.Action(room: "bedroom", lights: .on), days: [.mon, .fri],
                           sun: nil)
        let once = Alarm(uuid: "a2", userID: "1", title: "Dusk", fireDate: now.addingTimeInterval(60), isEnabled: true,
                         repeats: .never, action: Alarm.Action(room: "", lights: .off, group: "downstairs"),
                         sun: Alarm.SunTime(event: .sunset, offset: -900))
        try store.insert(weekly, now: now)
        try store.insert(once, now: now)
        #expect(try store.alarm(uuid: "a1", userID: "1") == weekly)
        #expect(try store.alarm(uuid: "a2", userID: "1") == once)
        #expect(try store.alarm(uuid: "a1", userID: "2") == nil, "another user's alarm")
        #expect(try store.unscheduled(limit: 10).map(\.handledThrough) == [now, now], "new: no check worked out yet")

        let nextWeek = now.addingTimeInterval(7 * 86_400)
        try store.recordFiring(uuid: "a1", occurrence: now.addingTimeInterval(3600), firedAt: now.addingTimeInterval(3601),
                               skipped: false, disable: false, nextCheck: nextWeek)
        try store.recordFiring(uuid: "a2", occurrence: now.addingTimeInterval(60), firedAt: now.addingTimeInterval(61),
                               skipped: false, disable: true, nextCheck: nextWeek)
        let enabled = try store.due(before: nextWeek, limit: 10)
        #expect(enabled.map(\.alarm.uuid) == ["a1"], "the one-shot alarm is disabled once fired")
        #expect(enabled.first?.handledThrough == now.addingTimeInterval(3600))
        #expect(enabled.first?.nextCheck == nextWeek)
        #expect(try store.due(before: nextWeek.addingTimeInterval(-1), limit: 10).isEmpty, "not due before its check")
        try store.setNextChecks([(uuid: "a1", expected: nextWeek, next: nextWeek.addingTimeInterval(60))])
        try store.setNextChecks([(uuid: "a1", expected: now, next: now)])  // a stale expectation changes nothing
        #expect(try store.scheduled(uuid: "a1")?.nextCheck == nextWeek.addingTimeInterval(60))
        #expect(try store.alarms(userID: "1").count == 2)
        #expect(try store.delete(uuid: "a1", userID: "2") == false)
        #expect(try store.delete(uuid: "a1", userID: "1"))
    }

    @Test(arguments: Engine.allCases) func announcedConfigsAreReplacedAsAWholeAndSurviveReopening(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let store = AnnouncedConfigStore(database: try test.open())
        #expect(try store.topics().isEmpty)
        try store.replace(with: ["ha/light/a/lights/config", "ha/sensor/a/temperature/config"])
        try store.replace(with: ["ha/light/a/lights/config", "ha/light/b/lights/config"])
        let reopened = AnnouncedConfigStore(database: try test.open())
        #expect(try reopened.topics() == ["ha/light/a/lights/config", "ha/light/b/lights/config"])
        // Another instance on the same database keeps its own record.
        let other = AnnouncedConfigStore(database: try test.open(), instance: 2)
        try other.replace(with: ["ha/light/c/lights/config"])
        #expect(try reopened.topics() == ["ha/light/a/lights/config", "ha/light/b/lights/config"])
        try reopened.replace(with: [])
        #expect(try store.topics().isEmpty)
        #expect(try other.topics() == ["ha/light/c/lights/config"])
    }

    /// Topics announced before the record was kept per instance belong to instance 0.
    @Test(arguments: Engine.allCases) func announcedConfigsOfEarlierVersionsAreKept(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let old = try test.open(migrations: Array(Migration.all.prefix { $0.version < 7 }))
        try old.execute("INSERT INTO announced_configs (topic) VALUES ('ha/light/a/lights/config')")
        #expect(try AnnouncedConfigStore(database: try test.open()).topics() == ["ha/light/a/lights/config"])
    }

    /// A history batch written again (its connection broke during COMMIT, README "PostgreSQL")
    /// records each reading once; the same sensor with another value at the same time is kept.
    @Test(arguments: Engine.allCases) func aBatchWrittenTwiceIsRecordedOnce(engine: Engine) throws {
        let history = HistoryStore(database: try TestDatabase(engine).open())
        let time = Date(timeIntervalSince1970: 1_700_000_000.123456)
        let batch = [HistoryStore.Row(user: "1", room: "kitchen", sensor: "temperature", time: time, value: "25.1"),
                     HistoryStore.Row(user: "1", room: "kitchen", sensor: "humidity", time: time, value: "55.0")]
        try history.append(batch)
        try history.append(batch)
        #expect(try history.count() == 2)
        try history.append([HistoryStore.Row(user: "1", room: "kitchen", sensor: "temperature", time: time, value: "25.2")])
        #expect(try history.count() == 3)
        #expect(try history.points(user: "1", room: "kitchen", sensor: "temperature", since: .distantPast, limit: 10)
            .map(\.value) == ["25.1", "25.2"])
    }

    /// Copies recorded before readings were unique are dropped by the upgrade, the oldest kept.
    @Test(arguments: Engine.allCases) func upgradingDropsRecordedCopiesOfAReading(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let old = try test.open(migrations: Array(Migration.all.prefix { $0.version < 13 }))
        for value in ["25.1", "25.1", "25.2", "25.1"] {
            try old.execute("INSERT INTO readings (user_id, room_id, sensor, t, value) VALUES ('1', 'kitchen', 'temperature', 10, ?)",
                            [.text(value)])
        }
        let history = HistoryStore(database: try test.open())
        #expect(try history.points(user: "1", room: "kitchen", sensor: "temperature", since: .distantPast, limit: 10)
            .map(\.value) == ["25.1", "25.2"])
    }

    @Test(arguments: Engine.allCases) func boundParametersAreNeverSQL(engine: Engine) throws {
        let database = try TestDatabase(engine).open()
        let revocations = RevocationStore(database: database)
        let evil = "x'); DROP TABLE revoked_sessions; -- ? $1"
        try revocations.add(id: evil, expiresAt: 100)
        #expect(try revocations.live(now: 0).map(\.id) == [evil])
        #expect(try database.query("SELECT count(*) FROM revoked_sessions").first?.first?.integer == 1)
        #expect(try database.query("SELECT id FROM revoked_sessions WHERE id = '?' OR expires_at = ?", [.integer(100)])
            .count == 1, "a ? in a quoted literal is text, not a placeholder")
    }

    @Test(arguments: Engine.allCases) func revocationsLastUntilTheirTokensExpire(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let revocations = RevocationStore(database: try test.open())
        try revocations.add(id: "a", expiresAt: 100)
        try revocations.add(id: "b", expiresAt: 200)
        try revocations.add(id: "b", expiresAt: 200)  // revoking twice is not an error
        #expect(try revocations.live(now: 99).map(\.id).sorted() == ["a", "b"])
        #expect(try revocations.live(now: 100).map(\.id) == ["b"])
        #expect(try revocations.purgeExpired(now: 100) == 1)
        let reopened = RevocationStore(database: try test.open())
        #expect(try reopened.live(now: 0).map(\.expiresAt) == [200])
    }

    @Test(arguments: Engine.allCases) func aSettingIsWrittenOnceAndKept(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let settings = SettingsStore(database: try test.open())
        #expect(try settings.value(of: "k") == nil)
        #expect(try settings.value(of: "k", orInsert: { "first" }) == "first")
        #expect(try settings.value(of: "k", orInsert: { "second" }) == "first")
        #expect(try SettingsStore(database: try test.open()).value(of: "k") == "first")
        try settings.set("k", to: "third")
        #expect(try settings.value(of: "k") == "third")
    }

    @Test(arguments: Engine.allCases) func upgradingDropsStoredSessions(engine: Engine) throws {
        let test = try TestDatabase(engine)
        let old = try test.open(migrations: Array(Migration.all.prefix { $0.version < 3 }))
        try old.execute("INSERT INTO sessions VALUES ('h', '1', 0, 1e12)")
        let upgraded = try test.open()
        #expect(upgraded.schemaVersion == Migration.all.last?.version)
        #expect(try !TestDatabase.tables(upgraded).contains("sessions"))
    }

    @Test(arguments: Engine.allCases) func aFailedStatementLeavesTheNextOnesAndTransactionsWorking(engine: Engine) throws {
        let database = try TestDatabase(engine).open()
        let insert = "INSERT INTO revoked_sessions (id, expires_at) VALUES (?, ?)"
        try database.execute(insert, [.text("t1"), .integer(10)])
        #expect(throws: StorageError.self) {
            try database.execute(insert, [.text("t1"), .integer(20)])  // duplicate key
        }
        #expect(try database.execute(insert, [.text("t2"), .integer(10)]) == 1)
        let deleted = try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
            try connection.execute("DELETE FROM revoked_sessions WHERE id = ?", [.text("t1")])
        }
        #expect(deleted == 1)
        #expect(throws: StorageError.self) {
            try database.transaction { (connection: borrowing DatabaseConnection) throws(StorageError) in
                try connection.execute("DELETE FROM revoked_sessions WHERE id = ?", [.text("t2")])
                try connection.execute(insert, [.text("t2"), .integer(1)])
                try connection.execute(insert, [.text("t2"), .integer(1)])  // fails: the delete is undone too
            }
        }
        #expect(try database.query("SELECT id, expires_at FROM revoked_sessions ORDER BY id")
            == [[.text("t2"), .integer(10)]])
        for number in 0..<100 {
            #expect(try database.query("SELECT \(number) + ?", [.integer(1)]) == [[.integer(Int64(number) + 1)]])
        }
    }

    /// What docs/architecture.md ("Storage") tells stores to write instead of SQLite-only SQL.
    @Test(arguments: Engine.allCases) func thePortableFormsWorkOnBothEngines(engine: Engine) throws {
        let database = try TestDatabase(engine).open()
        let insert = "INSERT INTO alarm_firings (uuid, occurrence, fired_at, skipped) VALUES (?, ?, ?, ?) RETURNING id"
        let first = try database.query(insert, [.text("a"), .real(1.5), .real(2), .integer(0)])
        let second = try database.query(insert, [.text("b"), .real(1.5), .real(2), .integer(1)])
        let ids = [first, second].compactMap { $0.first?.first?.integer }
        #expect(ids.count == 2 && ids[0] < ids[1], "\(first) \(second)")
        #expect(try database.query("SELECT uuid FROM alarm_firings WHERE skipped = 1") == [[.text("b")]])
        #expect(try database.query("SELECT CAST(? AS TEXT)", [.text("x")]) == [[.text("x")]])
        #expect(try database.query("SELECT uuid FROM alarm_firings WHERE lower(uuid) LIKE lower(?)", [.text("A")])
            == [[.text("a")]])
        #expect(try database.query("SELECT uuid, count(*) FROM alarm_firings GROUP BY uuid ORDER BY uuid")
            == [[.text("a"), .integer(1)], [.text("b"), .integer(1)]])
    }

    @Test(arguments: Engine.allCases) func historyKeepsOrderTimesAndEachSensorsNewestValue(engine: Engine) throws {
        let history = HistoryStore(database: try TestDatabase(engine).open())
        let start = Date(timeIntervalSince1970: 1_796_083_200.25)
        let rows = (0..<6).map { step in
            HistoryStore.Row(user: "1", room: step % 2 == 0 ? "kitchen" : "garden", sensor: "temperature",
                             time: start.addingTimeInterval(Double(step / 2)), value: "2\(step).0")
        }
        try history.append(rows)
        #expect(try history.count() == 6)
        let last = try history.lastValues().sorted { $0.room < $1.room }
        #expect(last == [rows[5], rows[4]])
        let kitchen = try history.points(user: "1", room: "kitchen", sensor: "temperature", since: start, limit: 10)
        #expect(kitchen.map(\.value) == ["20.0", "22.0", "24.0"])
        #expect(kitchen.map(\.time) == [start, start.addingTimeInterval(1), start.addingTimeInterval(2)])
        // Same time twice: insertion order decides.
        try history.append([HistoryStore.Row(user: "1", room: "cellar", sensor: "humidity", time: start, value: "b"),
                            HistoryStore.Row(user: "1", room: "cellar", sensor: "humidity", time: start, value: "a")])
        #expect(try history.points(user: "1", room: "cellar", sensor: "humidity", since: start, limit: 1).map(\.value)
            == ["b"])
        // A reading recorded again is not a second row, but it is the sensor's last value again.
        try history.append([rows[0]])
        #expect(try history.lastValues().first { $0.room == "kitchen" }?.value == "20.0")
        #expect(try history.prune(before: start.addingTimeInterval(1)) == 4)
        #expect(try history.count() == 4)
    }
}

/// Leases and fenced writes (docs/scaling.md, "Leases") on both engines.
@Suite struct LeaseStoreTests {
    @Test(arguments: Engine.allCases) func leasesAreTakenByOneInstanceAndOnlyWhenFreeOrExpired(engine: Engine) throws {
        let leases = LeaseStore(database: try TestDatabase(engine).open())
        let start = Date(timeIntervalSince1970: 1_796_083_200)
        #expect(try leases.apply(.acquire(user: "1", epoch: 1), instance: 0, now: start, duration: 10))
        #expect(try !leases.apply(.acquire(user: "1", epoch: 1), instance: 1, now: start, duration: 10), "raced and lost")
        #expect(try !leases.apply(.acquire(user: "1", epoch: 2), instance: 1, now: start.addingTimeInterval(5), duration: 10),
                "still held")
        #expect(try leases.apply(.renew(user: "1", epoch: 1), instance: 0, now: start.addingTimeInterval(3), duration: 10))
        #expect(try leases.leases()["1"] == .init(user: "1", instance: 0, epoch: 1, expiresAt: 1_796_083_213))
        // Instance 0 stops renewing: once expired, instance 1 takes it at the next epoch; 0's renewal then fails.
        #expect(try leases.apply(.acquire(user: "1", epoch: 2), instance: 1, now: start.addingTimeInterval(14), duration: 10))
        #expect(try !leases.apply(.renew(user: "1", epoch: 1), instance: 0, now: start.addingTimeInterval(15), duration: 10))
        #expect(try !leases.apply(.release(user: "1", epoch: 1), instance: 0, now: start.addingTimeInterval(15), duration: 10))
        #expect(try leases.apply(.release(user: "1", epoch: 2), instance: 1, now: start.addingTimeInterval(16), duration: 10))
        #expect(try leases.apply(.acquire(user: "1", epoch: 3), instance: 0, now: start.addingTimeInterval(16), duration: 10),
                "a released lease is free at once")

        try leases.heartbeat(instance: 0, until: start.addingTimeInterval(10))
        try leases.heartbeat(instance: 2, until: start.addingTimeInterval(4))
        try leases.heartbeat(instance: 0, until: start.addingTimeInterval(12))
        #expect(try leases.liveInstances(now: start.addingTimeInterval(5)) == [0])
        #expect(try leases.liveInstances(now: start) == [0, 2])
    }

    /// A round's upkeep: the heartbeat, every renewal and every hand-back in one transaction, each
    /// lease matched only at the epoch and holder it is kept at; more users than one statement names.
    @Test(arguments: Engine.allCases) func aRoundRenewsAndHandsBackEveryHeldLeaseAtItsEpochAtOnce(engine: Engine) throws {
        let leases = LeaseStore(database: try TestDatabase(engine).open())
        let start = Date(timeIntervalSince1970: 1_796_083_200)
        let users = (1...450).map { "u\($0)" }
        for user in users {
            #expect(try leases.apply(.acquire(user: user, epoch: 1), instance: 0, now: start, duration: 10))
        }
        // u1 ran out and instance 1 took it: instance 0's renewal at the old epoch leaves it alone.
        #expect(try leases.apply(.acquire(user: "u1", epoch: 2), instance: 1, now: start.addingTimeInterval(11), duration: 10))
        let held = Dictionary(uniqueKeysWithValues: users.map { ($0, Int64(1)) })
        var renew = held
        renew["u2"] = 7  // an epoch it never held
        renew["u3"] = nil
        let until = start.addingTimeInterval(25)
        let kept = try leases.keep(instance: 0, until: until, renew: renew, release: ["u3": 1, "u1": 1])
        #expect(kept.renewed == Set(users).subtracting(["u1", "u2", "u3"]))
        #expect(kept.released == ["u3"])
        let stored = try leases.leases()
        #expect(stored["u1"] == .init(user: "u1", instance: 1, epoch: 2, expiresAt: 1_796_083_221))
        #expect(stored["u2"] == .init(user: "u2", instance: 0, epoch: 1, expiresAt: 1_796_083_210))
        #expect(stored["u3"]?.isReleased == true)
        #expect(stored["u450"] == .init(user: "u450", instance: 0, epoch: 1, expiresAt: 1_796_083_225))
        #expect(try leases.liveInstances(now: start.addingTimeInterval(24)) == [0], "the heartbeat in the same transaction")

        // A clean stop: nothing renewed, everything handed back, the heartbeat ended.
        let stop = try leases.keep(instance: 0, until: start.addingTimeInterval(12), renew: [:],
                                   release: held.filter { !["u1", "u2", "u3"].contains($0.key) })
        #expect(stop.renewed.isEmpty && stop.released.count == 447)
        #expect(try leases.leases().values.filter { $0.instance == 0 && $0.isHeld(at: 1_796_083_209) }.map(\.user) == ["u2"])
        #expect(try leases.liveInstances(now: start.addingTimeInterval(13)).isEmpty)
    }

    /// An occurrence is claimed once whoever asks, and never by an instance whose lease moved on.
    @Test(arguments: Engine.allCases) func anAlarmOccurrenceIsClaimedOnceAndFencedByTheLeaseEpoch(engine: Engine) throws {
        let database = try TestDatabase(engine).open()
        let alarms = AlarmStore(database: database)
        let leases = LeaseStore(database: database)
        let now = Date(timeIntervalSince1970: 1_796_083_200)
        let alarm = Alarm(uuid: "a1", userID: "1", title: "Wake", fireDate: now.addingTimeInterval(60), isEnabled: true,
                          repeats: .daily, action: nil)
        try alarms.insert(alarm, now: now)
        let first = now.addingTimeInterval(60)
        let later = now.addingTimeInterval(86_400)
        #expect(try alarms.recordFiring(uuid: "a1", occurrence: first, firedAt: first, skipped: false, disable: false,
                                        nextCheck: later))
        #expect(try !alarms.recordFiring(uuid: "a1", occurrence: first, firedAt: first, skipped: false, disable: false,
                                         nextCheck: later),
                "the same occurrence a second time")

        #expect(try leases.apply(.acquire(user: "1", epoch: 1), instance: 0, now: now, duration: 200))
        let second = first.addingTimeInterval(86_400)
        let takeover = second.addingTimeInterval(-10)
        #expect(try leases.apply(.acquire(user: "1", epoch: 2), instance: 1, now: takeover, duration: 10))
        #expect(try !alarms.recordFiring(uuid: "a1", occurrence: second, firedAt: second, skipped: false, disable: false,
                                         nextCheck: later, fence: LeaseFence(user: "1", instance: 0, epoch: 1)), "the old owner is fenced")
        #expect(try alarms.recordFiring(uuid: "a1", occurrence: second, firedAt: takeover.addingTimeInterval(5),
                                        skipped: false, disable: false, nextCheck: later,
                                        fence: LeaseFence(user: "1", instance: 1, epoch: 2)))
        #expect(try database.query("SELECT count(*) FROM alarm_firings") == [[.integer(2)]])
    }
}
