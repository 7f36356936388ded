import BridgeCore
import BridgeStorage
import Foundation
import Synchronization

/// Fires alarms: every second it asks `AlarmSchedule` about each enabled alarm that is due,
/// publishes the `alarm` event, runs the action through the command path and records the firing.
///
/// Only the alarms due soon are in memory (README "Alarms", "Limits and pages"): each stored alarm
/// carries `next_check`, when `decide` next has something to do about it (indexed). Every second
/// the scheduler works out the check of alarms stored or edited since (those have none), and every
/// `reloadInterval` it reads those due within `horizon`, at most `maxLoaded`. An alarm is read
/// again by its uuid before it is decided, so a change made meanwhile through the API counts.
final class AlarmScheduler: BridgeFeature {
    let name = "alarms"
    /// How far ahead alarms are kept in memory, and how often that set is read again.
    static let horizon = 600.0
    static let reloadInterval = 60.0
    /// Alarms in memory at most (the soonest); the rest wait in the database for a later reload.
    static let maxLoaded = 10_000
    /// How far a check is put off when no occurrence is found within a year, or for a one-shot
    /// alarm that is past: it is looked at again then.
    static let idleCheck = 86_400.0

    private let store: AlarmStore
    private let schedule: AlarmSchedule
    private let controller: HomeController
    private let commands: CommandService
    private let logger: Logger
    /// Cluster: where a one-shot alarm's disabling after it fired is passed on.
    private let replication: AlarmReplication?
    /// Cluster on PostgreSQL: alarms fire for the users whose lease this instance holds, each
    /// occurrence fenced by the lease (docs/scaling.md, "Leases").
    private let leases: LeaseKeeper?

    private struct Loaded {
        var alarms: [String: AlarmStore.Scheduled] = [:]
        var reloadedAt: Date?
        /// `LeaseKeeper.acquisitionRounds` at the last reload: users taken over bring their alarms.
        var leaseRounds = 0
    }

    private let loaded = Mutex(Loaded())

    init(store: AlarmStore, schedule: AlarmSchedule, controller: HomeController, commands: CommandService,
         replication: AlarmReplication? = nil, leases: LeaseKeeper? = nil, logger: Logger) {
        self.commands = commands
        self.leases = leases
        self.store = store
        self.replication = replication
        self.schedule = schedule
        self.controller = controller
        self.logger = logger
    }

    /// Alarms held in memory (due within `horizon`).
    var loadedCount: Int { loaded.withLock { $0.alarms.count } }

    /// Decides and acts on every enabled alarm due at `now`.
    func tick(now: Date) {
        do {
            try scheduleNew(now: now)
            let leaseRounds = leases?.acquisitionRounds ?? 0
            if loaded.withLock({ loaded in
                loaded.leaseRounds != leaseRounds
                    || loaded.reloadedAt.map { now.timeIntervalSince($0) >= Self.reloadInterval } ?? true
            }) {
                let soon = try store.due(before: now.addingTimeInterval(Self.horizon), limit: Self.maxLoaded)
                loaded.withLock { $0 = Loaded(alarms: Dictionary(soon.map { ($0.alarm.uuid, $0) }) { _, last in last },
                                              reloadedAt: now, leaseRounds: leaseRounds) }
            }
            let due = loaded.withLock { $0.alarms.values.filter { ($0.nextCheck ?? now) <= now }.map(\.alarm.uuid) }
            for uuid in due { try decide(uuid: uuid, now: now) }
        } catch {
            logger.error("cannot read alarms", ["error": error.description])
        }
    }

    /// Works out when new and edited alarms are next looked at; keeps those due soon.
    private func scheduleNew(now: Date) throws(StorageError) {
        while true {
            let batch = try store.unscheduled(limit: 2_000)
            guard !batch.isEmpty else { return }
            var checks: [(uuid: String, expected: Date?, next: Date)] = []
            // On a shared database each alarm is scheduled by the holder of its user's lease, so the
            // instance that fires it also holds it in memory (others would keep it from the owner
            // until the next reload); the users of a dead instance are scheduled by who takes them.
            for var entry in batch where leases.map({ $0.fence(for: entry.alarm.userID) != nil }) ?? true {
                entry.nextCheck = nextCheck(entry.alarm, after: entry.handledThrough, now: now)
                checks.append((entry.alarm.uuid, nil, entry.nextCheck!))
                keep(entry, now: now)
            }
            try store.setNextChecks(checks)
            // A full batch of other instances' alarms is left to them rather than read again now.
            if batch.count < 2_000 || checks.isEmpty { return }
        }
    }

    private func nextCheck(_ alarm: Alarm, after time: Date, now: Date) -> Date {
        schedule.nextDecision(of: alarm, after: time) ?? max(time, now).addingTimeInterval(Self.idleCheck)
    }

    /// Holds `entry` in memory when it is due within the horizon (and there is room), else lets it go.
    private func keep(_ entry: AlarmStore.Scheduled, now: Date) {
        let soon = (entry.nextCheck ?? now) <= now.addingTimeInterval(Self.horizon)
        loaded.withLock { loaded in
            if soon, loaded.alarms.count < Self.maxLoaded || loaded.alarms[entry.alarm.uuid] != nil {
                loaded.alarms[entry.alarm.uuid] = entry
            } else {
                loaded.alarms[entry.alarm.uuid] = nil
            }
        }
    }

    /// One due alarm, read again first: fired or skipped by its owner, put off to its next check.
    private func decide(uuid: String, now: Date) throws(StorageError) {
        guard let entry = try store.scheduled(uuid: uuid), let check = entry.nextCheck, check <= now else {
            // Deleted, disabled, edited (its check is worked out again) or put off meanwhile.
            loaded.withLock { $0.alarms[uuid] = nil }
            return
        }
        let alarm = entry.alarm
        var next = entry
        // In a cluster every instance stores every alarm; only the user's owner fires it: the holder
        // of its lease on PostgreSQL, the hash owner otherwise.
        let fence = leases?.fence(for: alarm.userID)
        let owns = leases == nil ? controller.ownership.owns(alarm.userID) : fence != nil
        let decision = owns ? schedule.decide(alarm, now: now, handledThrough: entry.handledThrough) : .wait
        switch decision {
        case .wait:
            // On a shared database the check is the owner's to move on (it does when it handles the
            // occurrence): another instance leaves it and looks again next tick, so an occurrence due
            // while its owner is being taken over is still fired by the new holder of the lease.
            if !owns, leases != nil { return }
            next.nextCheck = nextCheck(alarm, after: now, now: now)
            try store.setNextChecks([(uuid, check, next.nextCheck!)])
        case .skip(let occurrence, let reason):
            logger.warning("alarm skipped: \(reason)",
                           ["user": alarm.userID, "alarm": alarm.uuid, "due": Timestamp.iso8601(occurrence)])
            next.nextCheck = record(alarm, occurrence: occurrence, now: now, skipped: true, fence: fence)
        case .fire(let occurrence):
            // Claimed first: if the bridge dies right after, the alarm is not fired twice; and an
            // occurrence another instance on the same database claimed is not fired here.
            next.nextCheck = record(alarm, occurrence: occurrence, now: now, skipped: false, fence: fence)
            if next.nextCheck != nil { fire(alarm, now: now) }
        }
        if alarm.repeats == .never, decision != .wait { next.nextCheck = nil }
        if next.nextCheck == nil {
            loaded.withLock { $0.alarms[uuid] = nil }
        } else {
            keep(next, now: now)
        }
    }

    /// Returns the next check it stored, `nil` when this instance did not claim the occurrence
    /// (another did, its lease is gone, or the database failed).
    private func record(_ alarm: Alarm, occurrence: Date, now: Date, skipped: Bool, fence: LeaseFence?) -> Date? {
        let next = nextCheck(alarm, after: max(occurrence, now), now: now)
        do {
            guard try store.recordFiring(uuid: alarm.uuid, occurrence: occurrence, firedAt: now, skipped: skipped,
                                         disable: alarm.repeats == .never, nextCheck: next, fence: fence)
            else { return nil }
            if alarm.repeats == .never {
                var disabled = alarm
                disabled.isEnabled = false
                replication?.changed(disabled)
            }
            return next
        } catch {
            logger.error("cannot record an alarm firing", ["alarm": alarm.uuid, "error": error.description])
            return nil
        }
    }

    private func fire(_ alarm: Alarm, now: Date) {
        logger.info("alarm fired", ["user": alarm.userID, "alarm": alarm.uuid, "title": alarm.title])
        controller.publishEvent(user: alarm.userID, BridgeEvent.alarm(alarm, firedAt: now))
        if let action = alarm.action {
            if let group = action.group {
                commands.alarmGroupAction(action.lights, user: alarm.userID, group: group)
            } else if action.room == Alarm.Action.everyRoom {
                commands.alarmGroupAction(action.lights, user: alarm.userID, group: nil)
            } else {
                commands.alarmAction(action.lights, user: alarm.userID, room: action.room)
            }
        }
    }

    /// Ticks every second until cancelled.
    func run() async {
        while !Task.isCancelled {
            tick(now: Date())
            do { try await Task.sleep(for: .seconds(1)) } catch { break }
        }
    }
}
