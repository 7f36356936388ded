import Foundation

/// One message for a user's targets, made from an event (README "Notifications").
public struct UserNotification: Sendable, Equatable {
    public var title: String
    public var message: String
    /// ntfy's 1 (min) to 5 (urgent).
    public var priority: Int
    /// ntfy's tags (emoji short codes show as emoji).
    public var tags: [String]
    /// The event's own JSON, what a webhook receives.
    public var event: JSONValue

    public init(title: String, message: String, priority: Int, tags: [String], event: JSONValue) {
        self.title = title
        self.message = message
        self.priority = priority
        self.tags = tags
        self.event = event
    }

    /// The notification for an event, or `nil` for events that notify nobody (refused commands,
    /// gas that went away, another instance's events).
    public static func about(_ event: BridgeEvent) -> UserNotification? {
        switch event {
        case .gas(let room, true, _):
            UserNotification(title: "Gas in \(room)", message: "The gas sensor in \(room) detects gas.", priority: 5,
                         tags: ["warning", "gas"], event: event.json)
        case .alarm(_, let title, _):
            UserNotification(title: title, message: "Alarm \"\(title)\" fired.", priority: 3, tags: ["alarm_clock"],
                         event: event.json)
        case .watchdog(let watchdog, let recovered, _):
            UserNotification(
                title: recovered ? "\(watchdog.title): recovered" : watchdog.title,
                message: recovered
                    ? "\(watchdog.room) \(watchdog.sensor.id) is back to normal."
                    : "\(watchdog.room) \(watchdog.sensor.id): \(describe(watchdog)).",
                priority: recovered ? 3 : 4, tags: [recovered ? "white_check_mark" : "rotating_light", "watchdog"],
                event: event.json)
        case .gas, .commandRejected, .relayed:
            nil
        }
    }

    /// A room (its device or upstream) that went offline: the hook for "device offline" notifications.
    public static func offline(room: String, at time: Date) -> UserNotification {
        UserNotification(title: "\(room) offline", message: "\(room) stopped answering.", priority: 3,
                     tags: ["electric_plug"], event: .object([("type", .string("availability")), ("room", .string(room)),
                                                              ("state", .string("offline")),
                                                              ("at", .string(Timestamp.iso8601(time)))]))
    }

    private static func describe(_ watchdog: Watchdog) -> String {
        let span = Watchdog.durationText(watchdog.duration)
        let value = watchdog.value.map { SensorValue.threeSignificantDigits($0) } ?? ""
        return switch watchdog.condition {
        case .silent: "no reading for \(span)"
        case .unchanged: "no change for \(span)"
        case .above: "above \(value) for \(span)"
        case .below: "below \(value) for \(span)"
        }
    }

    /// What ntfy's JSON publishing takes.
    public func ntfyBody(topic: String) -> JSONValue {
        .object([("topic", .string(topic)), ("title", .string(title)), ("message", .string(message)),
                 ("priority", .integer(priority)), ("tags", .strings(tags))])
    }
}
