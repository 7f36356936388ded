import Testing
import Foundation
@testable import BridgeCore

@Suite struct ClusterMembershipTests {
    @Test func everyUserHasExactlyOneOwner() {
        let users = (0..<1000).map { "user-\($0)" }
        let cluster = (0..<3).map { ClusterMembership(instances: 3, index: $0) }
        var shares = [0, 0, 0]
        for user in users {
            let owners = cluster.filter { $0.owns(user) }.map(\.index)
            #expect(owners.count == 1, "\(user) owned by \(owners)")
            shares[owners[0]] += 1
        }
        // FNV-1a spreads sequential ids well: no instance gets less than a quarter.
        #expect(shares.allSatisfy { $0 > 250 }, "\(shares)")
    }

    @Test func theHashIsStableAcrossProcessesAndReleases() {
        // Fixed values: an owner must never move because Swift's own hashing changed.
        #expect(ClusterMembership.stableHash("") == 0xcbf2_9ce4_8422_2325)
        #expect(ClusterMembership.stableHash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(ClusterMembership(instances: 3, index: 0).owner(of: "1")
            == Int(ClusterMembership.stableHash("1") % 3))
    }

    @Test func aSingleBridgeOwnsEveryone() {
        #expect(ClusterMembership.single.owns("anyone"))
        #expect(!ClusterMembership.single.isClustered)
    }

    @Test func clusterTopicsParse() {
        let topics = Topics(base: "smarthome")
        #expect(topics.instanceState(2) == "smarthome/bridge/2/state")
        #expect(topics.parseInstanceState("smarthome/bridge/2/state") == 2)
        #expect(topics.parseInstanceState("smarthome/bridge/state") == nil)
        #expect(topics.parseInstanceState("smarthome/bridge/x/state") == nil)
        #expect(topics.parseInstanceState("smarthome/bridge/-1/state") == nil)
        #expect(topics.parseSensorTopic("smarthome/1/kitchen/lights")! == ("1", "kitchen", "lights"))
        #expect(topics.parseSensorTopic("smarthome/bridge/2/state") == nil)
        #expect(topics.parseSensorTopic("smarthome/1/kitchen") == nil)
        #expect(topics.parseSensorTopic("smarthome/1/kitchen/lights/set") == nil)
        #expect(topics.parseSensorTopic("other/1/kitchen/lights") == nil)
        #expect(topics.parseEventsTopic("smarthome/1/events") == "1")
        #expect(topics.parseEventsTopic("smarthome/bridge/events") == nil)
        #expect(topics.parseEventsTopic("smarthome/1/kitchen/events") == nil)
    }

    @Test func relayedEventsKeepTheLineFormat() {
        #expect(ServerSentEvents.event("gas", json: #"{"type":"gas"}"#)
            == Array("event: gas\ndata: {\"type\":\"gas\"}\n\n".utf8))
        #expect(ServerSentEvents.event("gas", json: "{\n}") == nil, "a newline would end the data line")
        #expect(ServerSentEvents.event("a\nb", json: "{}") == nil)
    }

    @Test func clientIDsCarryTheIndex() {
        var configuration = BridgeConfiguration()
        #expect(configuration.clientID == "smarthome-bridge-smarthome")
        configuration.cluster.instances = 3
        configuration.cluster.index = 2
        #expect(configuration.clientID == "smarthome-bridge-smarthome-2")
    }
}

@Suite struct HistoryExchangeTests {
    @Test func requestsAndRepliesRoundTripAndRejectGarbage() throws {
        let request = HistoryExchange.Request(id: "abc", replyTo: "smarthome/bridge/0/history/reply/abc", user: "1",
                                              room: "kitchen", sensor: "temperature",
                                              since: Date(timeIntervalSince1970: 1_764_000_000.25), limit: 10)
        let parsed = HistoryExchange.Request(Array(request.json.serialized.utf8), maxLimit: 10_000)
        #expect(parsed == request)
        #expect(HistoryExchange.Request(Array(request.json.serialized.utf8), maxLimit: 5) == nil, "limit bounded")
        #expect(HistoryExchange.Request(Array("{}".utf8), maxLimit: 10) == nil)
        #expect(HistoryExchange.Request(Array("not json".utf8), maxLimit: 10) == nil)

        let points = [(time: Date(timeIntervalSince1970: 1_764_000_000.5), value: "25.7")]
        let reply = try #require(HistoryExchange.parseReply(Array(HistoryExchange.reply(id: "abc", points: points)
            .serialized.utf8)))
        #expect(reply.id == "abc")
        #expect(reply.points.map(\.value) == ["25.7"])
        #expect(reply.points.map(\.time) == points.map(\.time))
        #expect(HistoryExchange.parseReply(Array(#"{"id":"a","points":[[1]]}"#.utf8)) == nil)
    }
}

@Suite struct TimestampTests {
    @Test func matchesFoundationsISO8601WithMilliseconds() {
        let foundation = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var generator = SeededGenerator(seed: 11)
        var dates = [0, -0.001, 0.0005, 951_782_400, 1_764_444_682.123_456, 4_102_444_799.999_9, -86_400.5]
            .map { Date(timeIntervalSince1970: $0) }
        for _ in 0..<100_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: -2e9...5e9, using: &generator)))
        }
        let mismatches = dates.filter { Timestamp.iso8601($0) != foundation.format($0) }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(3).map { (Timestamp.iso8601($0), foundation.format($0)) })")
    }
}
