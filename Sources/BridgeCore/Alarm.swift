import Foundation

/// A user's alarm (README, "Alarms"): a title and a time (a time of day, or one relative to sunrise or
/// sunset), on or off, once, daily or on some days of the week, and optionally an action on one of the
/// user's rooms' lights.
public struct Alarm: Sendable, Equatable {
    public enum Repeats: String, Sendable, CaseIterable {
        case daily
        case weekly
        case never
    }

    /// A day of the week, as `"days"` names it.
    public enum Weekday: String, Sendable, CaseIterable, Comparable {
        case mon, tue, wed, thu, fri, sat, sun

        /// `Calendar`'s weekday number: 1 is Sunday.
        public init?(calendarWeekday: Int) {
            let order: [Weekday] = [.sun, .mon, .tue, .wed, .thu, .fri, .sat]
            guard (1...7).contains(calendarWeekday) else { return nil }
            self = order[calendarWeekday - 1]
        }

        public static func < (lhs: Weekday, rhs: Weekday) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// A time relative to the sun, instead of `fireDate`'s time of day: `fireDate` then only says the
    /// first day.
    public struct SunTime: Sendable, Equatable {
        public var event: SolarEvents.Event
        /// Seconds after the event (negative: before).
        public var offset: TimeInterval

        public init(event: SolarEvents.Event, offset: TimeInterval) {
            self.event = event
            self.offset = offset
        }

        /// The most an offset may move an alarm from its sun event.
        public static let maxOffset: TimeInterval = 6 * 3600

        /// `-30m`, `1h`, `90s`, `0m`: the largest unit that divides the offset.
        public var offsetText: String {
            let seconds = Int(offset.rounded())
            let sign = seconds < 0 ? "-" : ""
            let magnitude = abs(seconds)
            if magnitude % 3600 == 0, magnitude > 0 { return "\(sign)\(magnitude / 3600)h" }
            if magnitude % 60 == 0 { return "\(sign)\(magnitude / 60)m" }
            return "\(sign)\(magnitude)s"
        }

        /// `"-30m"`, `"+1h"`, `"45s"`, `"0"`: a duration with an optional sign.
        public static func parseOffset(_ text: String) -> TimeInterval? {
            var body = Substring(text.trimmingCharacters(in: .whitespaces))
            var sign = 1.0
            if body.hasPrefix("-") { sign = -1; body = body.dropFirst() } else if body.hasPrefix("+") { body = body.dropFirst() }
            guard !body.hasPrefix("-"), !body.hasPrefix("+"), let seconds = ConfigValue.parseDuration(String(body)),
                  seconds <= maxOffset
            else { return nil }
            return sign * seconds
        }
    }

    /// What an alarm switches: one room's lights, every light of the user (`room` `*`) or a
    /// group's (`group` set, `room` empty) (README, "Alarms").
    public struct Action: Sendable, Equatable {
        /// The room id to switch, or `*` for every light of the user.
        public var room: String
        public var lights: LightCommand
        /// A group's name: the action switches that group instead of a room.
        public var group: String?

        public init(room: String, lights: LightCommand, group: String? = nil) {
            self.room = room
            self.lights = lights
            self.group = group
        }

        /// `room` of every-lights actions.
        public static let everyRoom = "*"

        var json: JSONValue {
            if let group { return .object([("group", .string(group)), ("lights", .string(lights.rawValue))]) }
            return .object([("room", .string(room)), ("lights", .string(lights.rawValue))])
        }
    }

    public var uuid: String
    public var userID: String
    public var title: String
    public var fireDate: Date
    public var isEnabled: Bool
    public var repeats: Repeats
    public var action: Action?
    /// The days a weekly alarm fires on (empty for the others).
    public var days: Set<Weekday>
    /// When set, the alarm fires relative to sunrise or sunset at `scheduler.latitude`/`longitude`.
    public var sun: SunTime?

    public init(uuid: String, userID: String, title: String, fireDate: Date, isEnabled: Bool, repeats: Repeats,
                action: Action?, days: Set<Weekday> = [], sun: SunTime? = nil) {
        self.uuid = uuid
        self.userID = userID
        self.title = title
        self.fireDate = fireDate
        self.isEnabled = isEnabled
        self.repeats = repeats
        self.action = action
        self.days = days
        self.sun = sun
    }

    /// The alarm's own fields, as stored and replicated (README, "Alarms"); the API's answer adds
    /// `nextFire` (`AlarmSchedule.answer`).
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("uuid", .string(uuid)),
            ("title", .string(title)),
            ("fireDate", .string(Alarm.format(fireDate))),
            ("isEnabled", .bool(isEnabled)),
            ("repeats", .string(repeats.rawValue)),
        ]
        if repeats == .weekly {
            members.append(("days", .strings(days.sorted().map(\.rawValue))))
        }
        if let sun {
            members.append(("sun", .object([("event", .string(sun.event.rawValue)), ("offset", .string(sun.offsetText))])))
        }
        if let action {
            members.append(("action", action.json))
        }
        return .object(members)
    }

    /// `2026-12-01T07:00:00Z`: whole seconds, UTC.
    public static func format(_ date: Date) -> String {
        Date.ISO8601FormatStyle().format(date)
    }

    /// Accepts ISO 8601 date-times (`2026-12-01T07:00:00Z`, `2026-12-01T07:00:00.250+03:00`) and
    /// nothing else: a date or time that does not exist (`25:99`, 30 February) is refused rather than
    /// rolled over, as Foundation's parser would.
    public static func parseDate(_ text: String) -> Date? {
        let pattern = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|([+-])(\d{2}):(\d{2}))$/
        guard let match = text.wholeMatch(of: pattern),
              let year = Int(match.1), let month = Int(match.2), let day = Int(match.3),
              let hour = Int(match.4), let minute = Int(match.5), let second = Int(match.6)
        else { return nil }
        var offset = 0
        if let sign = match.9, let hours = match.10.flatMap({ Int($0) }), let minutes = match.11.flatMap({ Int($0) }) {
            guard hours <= 23, minutes <= 59 else { return nil }
            offset = (sign == "-" ? -1 : 1) * (hours * 3600 + minutes * 60)
        }
        guard let zone = TimeZone(secondsFromGMT: offset) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let components = DateComponents(calendar: calendar, timeZone: zone, year: year, month: month, day: day,
                                        hour: hour, minute: minute, second: second)
        guard hour <= 23, minute <= 59, second <= 59, components.isValidDate(in: calendar),
              let date = calendar.date(from: components)
        else { return nil }
        let fraction = match.7.flatMap { Double("0" + $0) } ?? 0
        return date.addingTimeInterval(fraction)
    }
}

/// The editable fields of an alarm, validated from an API body.
public struct AlarmDraft: Sendable, Equatable {
    public var title: String
    public var fireDate: Date
    public var isEnabled: Bool
    public var repeats: Alarm.Repeats
    public var action: Alarm.Action?
    public var days: Set<Alarm.Weekday> = []
    public var sun: Alarm.SunTime?

    /// A title is at most 100 characters and at most this many bytes: a character may be many bytes.
    static let maxTitleBytes = 400

    /// The alarm these fields make.
    public func alarm(uuid: String, userID: String) -> Alarm {
        Alarm(uuid: uuid, userID: userID, title: title, fireDate: fireDate, isEnabled: isEnabled, repeats: repeats,
              action: action, days: days, sun: sun)
    }

    /// Parses and validates `{"title","fireDate","isEnabled"?,"repeats"?,"days"?,"sun"?,"action"?}`
    /// (`nextFire` and `skipReason`, which answers carry, are ignored, so an answer can be sent back);
    /// `rooms` and `groups` are the user's own, the only ones an action may name.
    /// - Parameter sunKnown: whether `scheduler.latitude` and `scheduler.longitude` are set; without
    ///   them `"sun"` is refused.
    public static func parse(_ bytes: [UInt8], rooms: [Room], groups: [LightGroup] = [], sunKnown: Bool = true)
        -> Result<AlarmDraft, APIBody.Problem>
    {
        APIBody.object(bytes).flatMap { fields in
            let known: Set<String> = ["uuid", "title", "fireDate", "isEnabled", "repeats", "days", "sun", "action",
                                      "nextFire", "skipReason"]
            if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
                return .failure(.init("field \"\(unknown)\" is not an alarm field"))
            }
            let title: String
            switch APIBody.string(fields, "title") {
            case .success(let text): title = text
            case .failure(let problem): return .failure(problem)
            }
            let trimmed = title.trimmingCharacters(in: .whitespacesAndNewlines)
            guard (1...100).contains(trimmed.count), trimmed.utf8.count <= Self.maxTitleBytes else {
                return .failure(.init("field \"title\" must be 1 to 100 characters and at most \(Self.maxTitleBytes) bytes"))
            }
            guard let dateText = fields["fireDate"] as? String, let fireDate = Alarm.parseDate(dateText) else {
                return .failure(.init("field \"fireDate\" must be an ISO 8601 date and time, e.g. 2026-12-01T07:00:00Z"))
            }
            var isEnabled = true
            if let value = fields["isEnabled"] {
                guard let number = value as? NSNumber, JSONBoolean.isBoolean(number) else {
                    return .failure(.init("field \"isEnabled\" must be true or false"))
                }
                isEnabled = number.boolValue
            }
            var repeats = Alarm.Repeats.never
            if let value = fields["repeats"] {
                guard let word = value as? String, let parsed = Alarm.Repeats(rawValue: word) else {
                    return .failure(.init("field \"repeats\" must be \"daily\", \"weekly\" or \"never\""))
                }
                repeats = parsed
            }
            var days: Set<Alarm.Weekday> = []
            if let value = fields["days"], !(value is NSNull) {
                guard repeats == .weekly else {
                    return .failure(.init("field \"days\" is only for \"repeats\":\"weekly\""))
                }
                guard let words = value as? [Any], !words.isEmpty else {
                    return .failure(.init("field \"days\" must be a list of days, e.g. [\"mon\",\"fri\"]"))
                }
                for word in words {
                    guard let text = word as? String, let day = Alarm.Weekday(rawValue: text.lowercased()) else {
                        return .failure(.init("field \"days\" must list days from mon, tue, wed, thu, fri, sat, sun"))
                    }
                    days.insert(day)
                }
            } else if repeats == .weekly {
                return .failure(.init("field \"days\" is required for \"repeats\":\"weekly\" (e.g. [\"mon\",\"fri\"])"))
            }
            var sun: Alarm.SunTime?
            if let value = fields["sun"], !(value is NSNull) {
                guard let object = value as? [String: Any] else {
                    return .failure(.init("field \"sun\" must be an object {\"event\":\"sunrise\",\"offset\":\"-30m\"}"))
                }
                guard sunKnown else {
                    return .failure(.init("field \"sun\" needs scheduler.latitude and scheduler.longitude in the bridge's config"))
                }
                guard let word = object["event"] as? String, let event = SolarEvents.Event(rawValue: word) else {
                    return .failure(.init("field \"sun.event\" must be \"sunrise\" or \"sunset\""))
                }
                var offset: TimeInterval = 0
                if let text = object["offset"], !(text is NSNull) {
                    guard let text = text as? String, let parsed = Alarm.SunTime.parseOffset(text) else {
                        return .failure(.init("field \"sun.offset\" must be a duration up to 6h with an optional sign, e.g. \"-30m\""))
                    }
                    offset = parsed
                }
                if let unknown = object.keys.sorted().first(where: { $0 != "event" && $0 != "offset" }) {
                    return .failure(.init("field \"sun.\(unknown)\" is not a sun field"))
                }
                sun = Alarm.SunTime(event: event, offset: offset)
            }
            var action: Alarm.Action?
            if let value = fields["action"], !(value is NSNull) {
                guard let object = value as? [String: Any] else {
                    return .failure(.init("field \"action\" must be an object {\"room\":...,\"lights\":...}"))
                }
                guard let word = object["lights"] as? String, let command = LightCommand(word: word) else {
                    return .failure(.init("field \"action.lights\" must be ON, OFF or TOGGLE"))
                }
                if let unknown = object.keys.sorted().first(where: { !["room", "group", "lights"].contains($0) }) {
                    return .failure(.init("field \"action.\(unknown)\" is not an action field (room or group, and lights)"))
                }
                if let groupValue = object["group"] {
                    guard object["room"] == nil else {
                        return .failure(.init("field \"action\" names a room and a group; give one of them"))
                    }
                    guard let name = groupValue as? String, let group = groups.first(where: { $0.name == name }) else {
                        return .failure(.init("field \"action.group\" must name one of your groups"))
                    }
                    action = Alarm.Action(room: "", lights: command, group: group.name)
                } else if object["room"] as? String == Alarm.Action.everyRoom {
                    action = Alarm.Action(room: Alarm.Action.everyRoom, lights: command)
                } else {
                    guard let roomName = object["room"] as? String,
                          let room = rooms.first(where: { $0.id == roomName.lowercased() || $0.name == roomName }),
                          room.sensors.contains(.lights)
                    else {
                        return .failure(.init("field \"action.room\" must name one of your rooms with lights, or be \"*\""))
                    }
                    action = Alarm.Action(room: room.id, lights: command)
                }
            }
            return .success(AlarmDraft(title: trimmed, fireDate: fireDate, isEnabled: isEnabled, repeats: repeats,
                                       action: action, days: days, sun: sun))
        }
    }
}

/// Tells JSON `true`/`false` from the numbers 1/0, which Foundation's JSON parser also lets cast to `Bool`.
enum JSONBoolean {
    static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }
}
