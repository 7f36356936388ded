import Foundation

/// Cluster: the messages one instance sends another to read a user's history from the owner's
/// database (`<base>/bridge/<owner>/history/request`, answered on the requester's reply topic).
public enum HistoryExchange {
    public struct Request: Sendable, Equatable {
        public var id: String
        public var replyTo: String
        public var user: String
        public var room: String
        public var sensor: String
        public var since: Date
        public var limit: Int

        public init(id: String, replyTo: String, user: String, room: String, sensor: String, since: Date, limit: Int) {
            self.id = id
            self.replyTo = replyTo
            self.user = user
            self.room = room
            self.sensor = sensor
            self.since = since
            self.limit = limit
        }

        public var json: JSONValue {
            .object([
                ("id", .string(id)), ("replyTo", .string(replyTo)), ("user", .string(user)), ("room", .string(room)),
                ("sensor", .string(sensor)), ("since", .number(since.timeIntervalSince1970)),
                ("limit", .integer(limit)),
            ])
        }

        /// Parses and bounds a request; `nil` for anything malformed.
        public init?(_ bytes: [UInt8], maxLimit: Int) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  let id = object["id"] as? String, !id.isEmpty, id.count <= 64,
                  let replyTo = object["replyTo"] as? String, let user = object["user"] as? String,
                  let room = object["room"] as? String, let sensor = object["sensor"] as? String,
                  let since = (object["since"] as? NSNumber)?.doubleValue, since.isFinite,
                  let limit = (object["limit"] as? NSNumber)?.intValue, (1...maxLimit).contains(limit)
            else { return nil }
            self.init(id: id, replyTo: replyTo, user: user, room: room, sensor: sensor,
                      since: Date(timeIntervalSince1970: since), limit: limit)
        }
    }

    /// The answer: the points oldest first, each `[unix seconds, value]`.
    public static func reply(id: String, points: [(time: Date, value: String)]) -> JSONValue {
        .object([
            ("id", .string(id)),
            ("points", .array(points.map { .array([.number($0.time.timeIntervalSince1970), .string($0.value)]) })),
        ])
    }

    /// Parses an answer; `nil` for anything malformed.
    public static func parseReply(_ bytes: [UInt8]) -> (id: String, points: [(time: Date, value: String)])? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              let id = object["id"] as? String, let list = object["points"] as? [[Any]]
        else { return nil }
        var points: [(time: Date, value: String)] = []
        points.reserveCapacity(list.count)
        for pair in list {
            guard pair.count == 2, let seconds = (pair[0] as? NSNumber)?.doubleValue, let value = pair[1] as? String
            else { return nil }
            points.append((Date(timeIntervalSince1970: seconds), value))
        }
        return (id, points)
    }
}
