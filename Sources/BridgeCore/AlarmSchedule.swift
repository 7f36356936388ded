import Foundation

/// When alarms fire (README "Alarms"): pure date arithmetic in the scheduler's time zone, sunrise and
/// sunset at its place, and the decision for one alarm at one moment, so scheduling is tested with any clock.
public struct AlarmSchedule: Sendable {
    public var calendar: Calendar
    /// How late a firing may still happen (a bridge that was down comes back within this).
    public var grace: TimeInterval
    /// Where sunrise and sunset are computed (`scheduler.latitude`, `scheduler.longitude`); `nil`:
    /// alarms relative to the sun are refused.
    public var location: GeoLocation?

    public init(timeZone: TimeZone, grace: TimeInterval, location: GeoLocation? = nil) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        self.calendar = calendar
        self.grace = grace
        self.location = location
    }

    /// One day's occurrence of an alarm: when it is due, or, on a day without the sun event it
    /// follows, a stand-in time (that day's noon) to decide the skip at, with the reason.
    public struct Occurrence: Sendable, Equatable {
        public var time: Date
        public var polar: SolarEvents.Polar?
    }

    /// The alarm's occurrence on the `offset`-th calendar day after `fireDate`'s day, or `nil` when
    /// it does not fire that day (a one-shot alarm's other days, a weekly one's other weekdays).
    /// A time of day is counted in the calendar, so DST shifts keep the wall time.
    func occurrence(of alarm: Alarm, dayOffset offset: Int) -> Occurrence? {
        guard offset >= 0, alarm.repeats != .never || offset == 0,
              let time = calendar.date(byAdding: .day, value: offset, to: alarm.fireDate)
        else { return nil }
        if alarm.repeats == .weekly {
            guard let day = Alarm.Weekday(calendarWeekday: calendar.component(.weekday, from: time)),
                  alarm.days.contains(day)
            else { return nil }
        }
        guard let sun = alarm.sun else { return Occurrence(time: time, polar: nil) }
        // The sun's day is the calendar day of that date in the scheduler's zone, taken at 00:00 UTC.
        let parts = calendar.dateComponents([.year, .month, .day], from: time)
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        guard let location, let midnight = utc.date(from: parts) else { return nil }
        switch SolarEvents.time(of: sun.event, onDayStarting: midnight, at: location) {
        case .success(let event):
            return Occurrence(time: event.addingTimeInterval(sun.offset), polar: nil)
        case .failure(let polar):
            let noon = calendar.date(bySettingHour: 12, minute: 0, second: 0, of: time) ?? time
            return Occurrence(time: noon, polar: polar)
        }
    }

    /// Calendar days from `fireDate`'s day to `date`'s.
    private func days(to date: Date, from alarm: Alarm) -> Int {
        calendar.dateComponents([.day], from: calendar.startOfDay(for: alarm.fireDate),
                                to: calendar.startOfDay(for: date)).day ?? 0
    }

    /// The latest occurrence due at or before `now`, and not before `since`: a week back covers a
    /// weekly alarm, a day either side an offset from the sun that crosses midnight.
    public func latestOccurrence(of alarm: Alarm, atOrBefore now: Date, after since: Date) -> Occurrence? {
        let today = days(to: now, from: alarm)
        let candidates = (max(0, today - 8)...max(0, today + 1)).compactMap { occurrence(of: alarm, dayOffset: $0) }
        guard let latest = candidates.filter({ $0.time <= now }).max(by: { $0.time < $1.time }) else { return nil }
        return latest.time > since ? latest : nil
    }

    /// The next time the alarm fires strictly after `now` (days without the sun event are passed
    /// over), looking at most a year ahead.
    public func nextOccurrence(of alarm: Alarm, after now: Date) -> Date? {
        let today = days(to: now, from: alarm)
        for offset in max(0, today - 1)...max(0, today + 367) {
            if let next = occurrence(of: alarm, dayOffset: offset), next.polar == nil, next.time > now {
                return next.time
            }
            if alarm.repeats == .never, offset > 0 { break }
        }
        return nil
    }

    /// The first time after `handledThrough` at which `decide` has something to do about the alarm:
    /// its first occurrence after then, a day without its sun event included (decided at that day's
    /// noon). `nil` when there is none within a year. The scheduler keeps only the alarms whose time
    /// is near in memory (README "Alarms", "Limits and pages").
    public func nextDecision(of alarm: Alarm, after handledThrough: Date) -> Date? {
        let first = days(to: handledThrough, from: alarm)
        for offset in max(0, first - 1)...max(0, first + 367) {
            if let next = occurrence(of: alarm, dayOffset: offset), next.time > handledThrough { return next.time }
            if alarm.repeats == .never, offset > 0 { break }
        }
        return nil
    }

    /// What an answer says about when the alarm fires next: a time, or `nil` with the reason
    /// (README "Alarms": disabled, past, the sun does not rise that day).
    public func nextFire(of alarm: Alarm, now: Date) -> (date: Date?, skipReason: String?) {
        guard alarm.isEnabled else { return (nil, "disabled") }
        if let next = nextOccurrence(of: alarm, after: now) { return (next, nil) }
        if alarm.sun != nil, let only = occurrence(of: alarm, dayOffset: 0), let polar = only.polar {
            return (nil, polar.reason)
        }
        return (nil, alarm.repeats == .never ? "past" : "no occurrence within a year")
    }

    /// The alarm as the API answers with it: its fields plus `nextFire` (and `skipReason` when that is `null`).
    public func answer(_ alarm: Alarm, now: Date) -> JSONValue {
        guard case .object(var members) = alarm.json else { return alarm.json }
        let next = nextFire(of: alarm, now: now)
        members.append(("nextFire", next.date.map { .string(Alarm.format($0)) } ?? .null))
        if let reason = next.skipReason { members.append(("skipReason", .string(reason))) }
        return .object(members)
    }

    /// What to do about one alarm now.
    public enum Decision: Sendable, Equatable {
        /// Nothing is due.
        case wait
        /// Fire now for the occurrence at this time.
        case fire(occurrence: Date)
        /// Skip the occurrence at this time (and log why).
        case skip(occurrence: Date, reason: SkipReason)
    }

    public enum SkipReason: Sendable, Equatable, CustomStringConvertible {
        /// Missed by more than `grace` (the bridge was down).
        case late
        /// A day without the sun event the alarm follows.
        case polar(SolarEvents.Polar)

        public var description: String {
            switch self {
            case .late: "missed by more than scheduler.grace"
            case .polar(let polar): polar.reason
            }
        }
    }

    /// - Parameter handledThrough: occurrences at or before this time were already fired or
    ///   skipped (or predate the alarm); each occurrence is decided once, so nothing fires twice.
    public func decide(_ alarm: Alarm, now: Date, handledThrough: Date) -> Decision {
        guard alarm.isEnabled,
              let occurrence = latestOccurrence(of: alarm, atOrBefore: now, after: handledThrough)
        else { return .wait }
        if let polar = occurrence.polar { return .skip(occurrence: occurrence.time, reason: .polar(polar)) }
        return now.timeIntervalSince(occurrence.time) <= grace
            ? .fire(occurrence: occurrence.time) : .skip(occurrence: occurrence.time, reason: .late)
    }

    /// Sorting for lists: by time of day in the scheduler's zone (an alarm relative to the sun by
    /// its next firing's, else its first day's), then title, then uuid, so the order is total and
    /// pages of a list never overlap.
    public func timeOfDayOrder(_ lhs: Alarm, _ rhs: Alarm, now: Date) -> Bool {
        let left = secondsIntoDay(listedTime(lhs, now: now))
        let right = secondsIntoDay(listedTime(rhs, now: now))
        if left != right { return left < right }
        let (leftTitle, rightTitle) = (lhs.title.localizedLowercase, rhs.title.localizedLowercase)
        return leftTitle != rightTitle ? leftTitle < rightTitle : lhs.uuid < rhs.uuid
    }

    private func listedTime(_ alarm: Alarm, now: Date) -> Date {
        guard alarm.sun != nil else { return alarm.fireDate }
        return nextOccurrence(of: alarm, after: now) ?? occurrence(of: alarm, dayOffset: 0)?.time ?? alarm.fireDate
    }

    private func secondsIntoDay(_ date: Date) -> Int {
        let parts = calendar.dateComponents([.hour, .minute, .second], from: date)
        return (parts.hour ?? 0) * 3600 + (parts.minute ?? 0) * 60 + (parts.second ?? 0)
    }
}
