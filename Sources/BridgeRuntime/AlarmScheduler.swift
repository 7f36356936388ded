import BridgeCore
import BridgeStorage
import Foundation

/// Fires alarms: every second it asks `AlarmSchedule` about each enabled alarm, publishes the
/// `alarm` event, runs the action through the command path and records the firing. Changes made
/// through the API are seen at the next tick, without a restart.
final class AlarmScheduler: BridgeFeature {
    let name = "alarms"
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

    /// Decides and acts on every enabled alarm at `now`.
    func tick(now: Date) {
        let due: [(alarm: Alarm, handledThrough: Date)]
        do {
            due = try store.enabledAlarms()
        } catch {
            logger.error("cannot read alarms", ["error": error.description])
            return
        }
        // In a cluster every instance stores every alarm; only the user's owner fires it: the
        // holder of its lease on PostgreSQL, the hash owner otherwise.
        for (alarm, handledThrough) in due {
            let fence = leases?.fence(for: alarm.userID)
            guard leases == nil ? controller.membership.owns(alarm.userID) : fence != nil else { continue }
            switch schedule.decide(alarm, now: now, handledThrough: handledThrough) {
            case .wait:
                continue
            case .skip(let occurrence, let reason):
                logger.warning("alarm skipped: \(reason)",
                               ["user": alarm.userID, "alarm": alarm.uuid, "due": Timestamp.iso8601(occurrence)])
                record(alarm, occurrence: occurrence, now: now, skipped: true, fence: fence)
            case .fire(let occurrence):
                // Claimed first: if the bridge dies right after, the alarm is not fired twice; and
                // an occurrence another instance on the same database claimed is not fired here.
                if record(alarm, occurrence: occurrence, now: now, skipped: false, fence: fence) { fire(alarm, now: now) }
            }
        }
    }

    /// Whether this instance claimed the occurrence.
    @discardableResult
    private func record(_ alarm: Alarm, occurrence: Date, now: Date, skipped: Bool, fence: LeaseFence?) -> Bool {
        do {
            guard try store.recordFiring(uuid: alarm.uuid, occurrence: occurrence, firedAt: now, skipped: skipped,
                                         disable: alarm.repeats == .never, fence: fence) else { return false }
            if alarm.repeats == .never {
                var disabled = alarm
                disabled.isEnabled = false
                replication?.changed(disabled)
            }
            return true
        } catch {
            logger.error("cannot record an alarm firing", ["alarm": alarm.uuid, "error": error.description])
            return false
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
