import Foundation

/// A user's watchdog (README "Watchdogs"): a condition on one sensor of one of the user's rooms that
/// must hold for a while before it fires, once per episode.
public struct Watchdog: Sendable, Equatable {
    public enum Condition: String, Sendable, CaseIterable {
        /// The value did not change for `duration`.
        case unchanged
        /// No reading at all for `duration` (a dead sensor, an upstream that stopped answering).
        case silent
        /// The value stayed above `value` for `duration`.
        case above
        /// The value stayed below `value` for `duration`.
        case below
    }

    /// Hours in which the watchdog does not fire (it fires when they end, if its condition still holds).
    public struct QuietHours: Sendable, Equatable {
        /// Minutes after midnight in `scheduler.timezone`.
        public var from: Int
        public var to: Int

        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }

        /// Whether `minute` (after midnight) is inside; a span past midnight (22:00–07:00) wraps.
        public func contains(minute: Int) -> Bool {
            from < to ? (from..<to).contains(minute) : minute >= from || minute < to
        }

        static func text(_ minutes: Int) -> String {
            String(format: "%02d:%02d", minutes / 60, minutes % 60)
        }

        /// `HH:MM`, 24-hour.
        static func parse(_ text: String) -> Int? {
            guard let match = text.wholeMatch(of: /(\d{2}):(\d{2})/), let hours = Int(match.1),
                  let minutes = Int(match.2), hours < 24, minutes < 60
            else { return nil }
            return hours * 60 + minutes
        }
    }

    public var uuid: String
    public var userID: String
    public var title: String
    public var room: String
    public var sensor: SensorKind
    public var condition: Condition
    /// The threshold of `above` and `below`.
    public var value: Double?
    /// How long the condition must hold (`"for"`).
    public var duration: TimeInterval
    public var quiet: QuietHours?
    public var isEnabled: Bool

    public init(uuid: String, userID: String, title: String, room: String, sensor: SensorKind, condition: Condition,
                value: Double?, duration: TimeInterval, quiet: QuietHours?, isEnabled: Bool = true) {
        self.uuid = uuid
        self.userID = userID
        self.title = title
        self.room = room
        self.sensor = sensor
        self.condition = condition
        self.value = value
        self.duration = duration
        self.quiet = quiet
        self.isEnabled = isEnabled
    }

    /// The longest `for` a watchdog may have.
    public static let maxDuration: TimeInterval = 30 * 86_400

    /// `12h`, `90m`, `45s`: the largest unit that divides the duration.
    public static func durationText(_ seconds: TimeInterval) -> String {
        let whole = Int(seconds.rounded())
        if Double(whole) != seconds { return "\(seconds)s" }
        for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60)] where whole % size == 0 && whole > 0 {
            return "\(whole / size)\(unit)"
        }
        return "\(whole)s"
    }

    /// The watchdog's own fields, as the API answers with them (plus its state: `WatchdogState.json`).
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("uuid", .string(uuid)),
            ("title", .string(title)),
            ("room", .string(room)),
            ("sensor", .string(sensor.id)),
            ("condition", .string(condition.rawValue)),
        ]
        if let value { members.append(("value", .number(value))) }
        members.append(("for", .string(Watchdog.durationText(duration))))
        if let quiet {
            members.append(("quiet", .object([("from", .string(QuietHours.text(quiet.from))),
                                              ("to", .string(QuietHours.text(quiet.to)))])))
        }
        members.append(("isEnabled", .bool(isEnabled)))
        return .object(members)
    }
}

/// The editable fields of a watchdog, validated from an API body.
public struct WatchdogDraft: Sendable, Equatable {
    public var title: String
    public var room: String
    public var sensor: SensorKind
    public var condition: Watchdog.Condition
    public var value: Double?
    public var duration: TimeInterval
    public var quiet: Watchdog.QuietHours?
    public var isEnabled: Bool

    public func watchdog(uuid: String, userID: String) -> Watchdog {
        Watchdog(uuid: uuid, userID: userID, title: title, room: room, sensor: sensor, condition: condition,
                 value: value, duration: duration, quiet: quiet, isEnabled: isEnabled)
    }

    /// Parses `{"title","room","sensor","condition","value"?,"for","quiet"?,"isEnabled"?}` (an
    /// answer's `uuid` and `state` members are ignored, so an answer can be sent back); the room must
    /// be one of `rooms` and have the sensor; `above`/`below` need a numeric sensor and a `value`.
    public static func parse(_ bytes: [UInt8], rooms: [Room]) -> Result<WatchdogDraft, APIBody.Problem> {
        APIBody.object(bytes).flatMap { fields in
            let known: Set<String> = ["uuid", "title", "room", "sensor", "condition", "value", "for", "quiet",
                                      "isEnabled", "state", "firedAt"]
            if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
                return .failure(.init("field \"\(unknown)\" is not a watchdog field"))
            }
            guard let title = (fields["title"] as? String)?.trimmingCharacters(in: .whitespacesAndNewlines),
                  (1...100).contains(title.count)
            else { return .failure(.init("field \"title\" must be 1 to 100 characters")) }
            guard let roomName = fields["room"] as? String,
                  let room = rooms.first(where: { $0.id == roomName.lowercased() || $0.name == roomName })
            else { return .failure(.init("field \"room\" must name one of your rooms")) }
            guard let sensorName = fields["sensor"] as? String,
                  let sensor = room.sensors.first(where: { $0.id == sensorName.lowercased() })
            else {
                return .failure(.init("field \"sensor\" must be one of \(room.sensors.map(\.id).joined(separator: ", "))"))
            }
            guard let word = fields["condition"] as? String, let condition = Watchdog.Condition(rawValue: word) else {
                return .failure(.init("field \"condition\" must be \"unchanged\", \"silent\", \"above\" or \"below\""))
            }
            var value: Double?
            if condition == .above || condition == .below {
                guard sensor.isNumeric else {
                    return .failure(.init("field \"condition\" \"\(word)\" needs a numeric sensor (\(sensor.id) is not)"))
                }
                guard let number = fields["value"] as? NSNumber, !JSONBoolean.isBoolean(number),
                      number.doubleValue.isFinite
                else { return .failure(.init("field \"value\" must be a number for \"\(word)\"")) }
                value = number.doubleValue
            } else if let extra = fields["value"], !(extra is NSNull) {
                return .failure(.init("field \"value\" is only for \"above\" and \"below\""))
            }
            guard let text = fields["for"] as? String, let duration = ConfigValue.parseDuration(text), duration >= 1,
                  duration <= Watchdog.maxDuration
            else { return .failure(.init("field \"for\" must be a duration from 1s to 30d, e.g. \"12h\"")) }
            var quiet: Watchdog.QuietHours?
            if let value = fields["quiet"], !(value is NSNull) {
                guard let object = value as? [String: Any],
                      let from = (object["from"] as? String).flatMap(Watchdog.QuietHours.parse),
                      let to = (object["to"] as? String).flatMap(Watchdog.QuietHours.parse),
                      from != to, object.count == 2
                else {
                    return .failure(.init("field \"quiet\" must be {\"from\":\"HH:MM\",\"to\":\"HH:MM\"} with two different times"))
                }
                quiet = Watchdog.QuietHours(from: from, to: to)
            }
            var isEnabled = true
            if let value = fields["isEnabled"] {
                guard let number = value as? NSNumber, JSONBoolean.isBoolean(number) else {
                    return .failure(.init("field \"isEnabled\" must be true or false"))
                }
                isEnabled = number.boolValue
            }
            return .success(WatchdogDraft(title: title, room: room.id, sensor: sensor, condition: condition, value: value,
                                          duration: duration, quiet: quiet, isEnabled: isEnabled))
        }
    }
}
