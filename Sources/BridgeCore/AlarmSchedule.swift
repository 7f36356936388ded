import Foundation

/// When alarms fire: pure date arithmetic in the scheduler's time zone, and the decision for one
/// alarm at one moment, so scheduling is tested with any clock.
public struct AlarmSchedule: Sendable {
    public var calendar: Calendar
    /// How late a firing may still happen (a bridge that was down comes back within this).
    public var grace: TimeInterval

    public init(timeZone: TimeZone, grace: TimeInterval) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        self.calendar = calendar
        self.grace = grace
    }

    /// The latest time the alarm was due at or before `now`, and not before `since`: the
    /// `fireDate` itself for a one-shot alarm; for a daily one, `fireDate`'s time of day on the
    /// latest day that qualifies (days counted in the calendar, so DST shifts keep the wall time).
    public func latestOccurrence(of alarm: Alarm, atOrBefore now: Date, after since: Date) -> Date? {
        switch alarm.repeats {
        case .never:
            return alarm.fireDate <= now && alarm.fireDate > since ? alarm.fireDate : nil
        case .daily:
            guard alarm.fireDate <= now else { return nil }
            let days = calendar.dateComponents([.day], from: calendar.startOfDay(for: alarm.fireDate),
                                               to: calendar.startOfDay(for: now)).day ?? 0
            for offset in [days, days - 1] where offset >= 0 {
                if let candidate = calendar.date(byAdding: .day, value: offset, to: alarm.fireDate),
                   candidate <= now {
                    return candidate > since ? candidate : nil
                }
            }
            return nil
        }
    }

    /// The next time the alarm is due strictly after `now` (for logs and the scheduler's sleep).
    public func nextOccurrence(of alarm: Alarm, after now: Date) -> Date? {
        switch alarm.repeats {
        case .never:
            return alarm.fireDate > now ? alarm.fireDate : nil
        case .daily:
            guard alarm.fireDate <= now else { return alarm.fireDate }
            let days = calendar.dateComponents([.day], from: calendar.startOfDay(for: alarm.fireDate),
                                               to: calendar.startOfDay(for: now)).day ?? 0
            for offset in [days, days + 1, days + 2] {
                if let candidate = calendar.date(byAdding: .day, value: offset, to: alarm.fireDate), candidate > now {
                    return candidate
                }
            }
            return nil
        }
    }

    /// What to do about one alarm now.
    public enum Decision: Sendable, Equatable {
        /// Nothing is due.
        case wait
        /// Fire now for the occurrence at this time.
        case fire(occurrence: Date)
        /// An occurrence was missed by more than `grace`: skip it (and log it).
        case skip(occurrence: Date)
    }

    /// - Parameter handledThrough: occurrences at or before this time were already fired or
    ///   skipped (or predate the alarm); each occurrence is decided once, so nothing fires twice.
    public func decide(_ alarm: Alarm, now: Date, handledThrough: Date) -> Decision {
        guard alarm.isEnabled,
              let occurrence = latestOccurrence(of: alarm, atOrBefore: now, after: handledThrough)
        else { return .wait }
        return now.timeIntervalSince(occurrence) <= grace ? .fire(occurrence: occurrence) : .skip(occurrence: occurrence)
    }

    /// Sorting for lists: by time of day in the scheduler's zone, then title.
    public func timeOfDayOrder(_ lhs: Alarm, _ rhs: Alarm) -> Bool {
        let left = secondsIntoDay(lhs.fireDate)
        let right = secondsIntoDay(rhs.fireDate)
        return left != right ? left < right : lhs.title.localizedLowercase < rhs.title.localizedLowercase
    }

    private func secondsIntoDay(_ date: Date) -> Int {
        let parts = calendar.dateComponents([.hour, .minute, .second], from: date)
        return (parts.hour ?? 0) * 3600 + (parts.minute ?? 0) * 60 + (parts.second ?? 0)
    }
}
