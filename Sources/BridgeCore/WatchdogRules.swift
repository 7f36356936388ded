import Foundation

/// What the bridge has seen of one sensor: when it last sent a reading, when its value last changed,
/// and the value (README "Watchdogs"). Kept by the runtime from the state bus.
public struct SensorObservation: Sendable, Equatable {
    public var lastReading: Date
    public var lastChange: Date
    public var value: SensorValue

    public init(lastReading: Date, lastChange: Date, value: SensorValue) {
        self.lastReading = lastReading
        self.lastChange = lastChange
        self.value = value
    }

    /// The observation after a reading at `time`.
    public func noting(_ value: SensorValue, at time: Date) -> SensorObservation {
        SensorObservation(lastReading: time, lastChange: value == self.value ? lastChange : time, value: value)
    }
}

/// A watchdog's episode, as stored (it survives restarts): armed, or fired and waiting for recovery.
public struct WatchdogState: Sendable, Equatable {
    public enum Phase: String, Sendable {
        case armed
        case fired
    }

    public var phase: Phase
    /// When it last fired (while `fired`).
    public var firedAt: Date?
    /// `above`/`below`: since when the value has been past the threshold.
    public var breachSince: Date?
    /// When it was created, edited or recovered: silence and sameness count from here at the earliest.
    public var armedAt: Date

    public init(phase: Phase = .armed, firedAt: Date? = nil, breachSince: Date? = nil, armedAt: Date) {
        self.phase = phase
        self.firedAt = firedAt
        self.breachSince = breachSince
        self.armedAt = armedAt
    }

    /// The `state` and `firedAt` members of an answer.
    public var members: [(String, JSONValue)] {
        [("state", .string(phase.rawValue)), ("firedAt", firedAt.map { .string(Timestamp.iso8601($0)) } ?? .null)]
    }
}

/// When watchdogs fire and recover: a pure state machine of the watchdog, what was observed of its
/// sensor, its stored state and the time, like `AlarmSchedule.decide`, so it is tested with any clock.
public struct WatchdogRules: Sendable {
    public var calendar: Calendar

    public init(timeZone: TimeZone) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        self.calendar = calendar
    }

    public enum Action: Sendable, Equatable {
        /// The condition held for the watchdog's `for` (outside its quiet hours): one event.
        case fire
        /// A fired watchdog's condition ended: one `recovered` event, and it is armed again.
        case recover
    }

    public struct Outcome: Sendable, Equatable {
        /// The state to keep (store it when it differs from the one given).
        public var state: WatchdogState
        public var action: Action?
    }

    /// - Parameters:
    ///   - observation: the sensor as seen since `watchingSince`, `nil` when it sent nothing since.
    ///   - watchingSince: when the bridge started watching (its start): silence and sameness are
    ///     never counted from before it, so a restart does not fire at once for a sensor that has
    ///     simply not been polled yet.
    public func decide(_ watchdog: Watchdog, observation: SensorObservation?, state: WatchdogState, now: Date,
                       watchingSince: Date) -> Outcome {
        var next = state
        let floor = max(state.armedAt, watchingSince)
        let holds: Bool
        switch watchdog.condition {
        case .silent:
            let since = max(observation?.lastReading ?? floor, floor)
            holds = now.timeIntervalSince(since) >= watchdog.duration
        case .unchanged:
            let since = max(observation?.lastChange ?? floor, floor)
            holds = now.timeIntervalSince(since) >= watchdog.duration
        case .above, .below:
            let past: Bool
            if case .number(let number)? = observation?.value, let threshold = watchdog.value {
                past = watchdog.condition == .above ? number > threshold : number < threshold
            } else {
                past = false
            }
            next.breachSince = past ? (state.breachSince ?? now) : nil
            holds = next.breachSince.map { now.timeIntervalSince($0) >= watchdog.duration } ?? false
        }

        switch state.phase {
        case .armed:
            guard watchdog.isEnabled, holds, !isQuiet(watchdog, at: now) else { return Outcome(state: next, action: nil) }
            next.phase = .fired
            next.firedAt = now
            return Outcome(state: next, action: .fire)
        case .fired:
            let firedAt = state.firedAt ?? state.armedAt
            let recovered: Bool
            switch watchdog.condition {
            case .silent: recovered = (observation?.lastReading).map { $0 > firedAt } ?? false
            case .unchanged: recovered = (observation?.lastChange).map { $0 > firedAt } ?? false
            case .above, .below: recovered = next.breachSince == nil
            }
            guard recovered else { return Outcome(state: next, action: nil) }
            next.phase = .armed
            next.firedAt = nil
            next.armedAt = now
            return Outcome(state: next, action: .recover)
        }
    }

    /// Whether `now` is inside the watchdog's quiet hours (in the scheduler's time zone).
    public func isQuiet(_ watchdog: Watchdog, at now: Date) -> Bool {
        guard let quiet = watchdog.quiet else { return false }
        let parts = calendar.dateComponents([.hour, .minute], from: now)
        return quiet.contains(minute: (parts.hour ?? 0) * 60 + (parts.minute ?? 0))
    }
}
