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

    init(store: AlarmStore, schedule: AlarmSchedule, controller: HomeController, commands: CommandService,
         replication: AlarmReplication? = nil, logger: Logger) {
        self.commands = commands
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
        // In a cluster every instance stores every alarm; only the user's owner fires it.
        for (alarm, handledThrough) in due where controller.membership.owns(alarm.userID) {
            switch schedule.decide(alarm, now: now, handledThrough: handledThrough) {
            case .wait:
                continue
            case .skip(let occurrence, let reason):
                logger.warning("alarm skipped: \(reason)",
                               ["user": alarm.userID, "alarm": alarm.uuid, "due": Timestamp.iso8601(occurrence)])
                record(alarm, occurrence: occurrence, now: now, skipped: true)
            case .fire(let occurrence):
                // Recorded first: if the bridge dies right after, the alarm is not fired twice.
                record(alarm, occurrence: occurrence, now: now, skipped: false)
                fire(alarm, now: now)
            }
        }
    }

    private func record(_ alarm: Alarm, occurrence: Date, now: Date, skipped: Bool) {
        do {
            try store.recordFiring(uuid: alarm.uuid, occurrence: occurrence, firedAt: now, skipped: skipped,
                                   disable: alarm.repeats == .never)
            if alarm.repeats == .never {
                var disabled = alarm
                disabled.isEnabled = false
                replication?.changed(disabled)
            }
        } catch {
            logger.error("cannot record an alarm firing", ["alarm": alarm.uuid, "error": error.description])
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
