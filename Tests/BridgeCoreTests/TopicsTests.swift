import Testing
@testable import BridgeCore

@Suite struct TopicsTests {
    let topics = Topics(base: "smarthome")

    @Test func namesFollowTheContract() {
        #expect(topics.sensor(user: "1", room: "kitchen", sensor: .temperature) == "smarthome/1/kitchen/temperature")
        #expect(topics.room(user: "2", room: "garden") == "smarthome/2/garden")
        #expect(topics.lightsSet(user: "1", room: "kitchen") == "smarthome/1/kitchen/lights/set")
        #expect(topics.availability(user: "1", room: "kitchen") == "smarthome/1/kitchen/availability")
        #expect(topics.events(user: "1") == "smarthome/1/events")
        #expect(topics.bridgeState == "smarthome/bridge/state")
        #expect(topics.bridgeInfo == "smarthome/bridge/info")
        #expect(topics.commandFilter == "smarthome/+/+/+/set")
        #expect(Topics(base: "home/a").bridgeState == "home/a/bridge/state")
    }

    @Test func parsesCommandTopics() {
        let parsed = topics.parseCommandTopic("smarthome/1/kitchen/lights/set")
        #expect(parsed?.user == "1")
        #expect(parsed?.room == "kitchen")
        #expect(parsed?.sensor == "lights")
        #expect(topics.parseCommandTopic("smarthome/1/kitchen/temperature/set")?.sensor == "temperature")
    }

    @Test(arguments: [
        "smarthome/1/kitchen/lights", "smarthome/1/kitchen/lights/get", "other/1/kitchen/lights/set",
        "smarthome/1//lights/set", "smarthome/1/kitchen/lights/set/x", "smarthomex/1/kitchen/lights/set", "",
    ])
    func rejectsOtherTopics(topic: String) {
        #expect(topics.parseCommandTopic(topic) == nil)
    }

    @Test func validatesBaseTopics() {
        #expect(Topics.validateBase("smarthome") == nil)
        #expect(Topics.validateBase("site/a") == nil)
        #expect(Topics.validateBase("") != nil)
        #expect(Topics.validateBase("a/#") != nil)
        #expect(Topics.validateBase("a/+/b") != nil)
        #expect(Topics.validateBase("/a") != nil)
        #expect(Topics.validateBase("a/") != nil)
        #expect(Topics.validateBase("a//b") != nil)
    }
}
