import Testing
@testable import BridgeCore

@Suite struct SeedRoomParserTests {
    func parse(_ json: String) -> Result<[(sensor: SensorKind, value: SensorValue)], SeedRoomParser.Problem> {
        SeedRoomParser.parse(Array(json.utf8))
    }

    @Test func readsTheSeedVocabularyAndPassesUnknownSensorsThrough() throws {
        let readings = try parse(#"{"SensorNames":["Temperature","Humidity","Lights","Movement","Gas","Air Quality"],"SensorIcon":["temperature","humidity","On","Detected","Okey","aq"],"SensorValues":["25.7","55.2","On","Detected","Okey","good"]}"#).get()
        #expect(readings.map(\.sensor.id) == ["temperature", "humidity", "lights", "movement", "gas", "air_quality"])
        #expect(readings.map(\.value) == [.number(25.7), .number(55.2), .binary(true), .binary(true), .binary(false),
                                          .text("good")])
        #expect(readings[5].sensor.displayName == "Air Quality")
        #expect(!readings[5].sensor.isKnown)
        // Numbers sent as JSON numbers are accepted too.
        #expect(try parse(#"{"SensorNames":["Temperature"],"SensorValues":[25]}"#).get().first?.value == .number(25))
    }

    @Test(arguments: [
        ("<html>", "not JSON"),
        ("[1,2]", "not a JSON object"),
        (#"{"SensorValues":["1"]}"#, "no SensorNames"),
        (#"{"SensorNames":["Temperature"]}"#, "no SensorValues"),
        (#"{"SensorNames":["Temperature","Humidity"],"SensorValues":["1"]}"#, "2 entries but SensorValues has 1"),
        (#"{"SensorNames":["Temperature"],"SensorIcon":[],"SensorValues":["1"]}"#, "SensorIcon has 0 entries"),
        (#"{"SensorNames":["Temperature"],"SensorValues":["warm"]}"#, "Temperature has the value \"warm\""),
        (#"{"SensorNames":["Gas"],"SensorValues":["Maybe"]}"#, "Gas has the value"),
        (#"{"SensorNames":[""],"SensorValues":["1"]}"#, "SensorNames[0]"),
        (#"{"SensorNames":["Gas"],"SensorValues":[true]}"#, "SensorValues[0]"),
        (#"{"SensorNames":["Gas","gas"],"SensorValues":["Gas","Okey"]}"#, "listed twice"),
    ])
    func badAnswersNameWhatIsWrong(json: String, problem: String) {
        guard case .failure(let found) = parse(json) else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(found.description.contains(problem), "\(found)")
    }
}

@Suite struct PollScheduleTests {
    @Test func failuresBackOffGoOfflineAndRecover() {
        var schedule = PollSchedule(interval: 5, maxBackoff: 30, failuresBeforeOffline: 3, firstPoll: 0)
        var change = schedule.failed(start: 0, problem: "status 500")
        #expect(change.worthLogging && !change.availabilityChanged && schedule.isOnline)
        #expect(schedule.nextPoll == 5)
        change = schedule.failed(start: 5, problem: "status 500")
        #expect(!change.worthLogging, "the same problem again is not logged again")
        #expect(schedule.nextPoll == 15)
        change = schedule.failed(start: 15, problem: "status 500")
        #expect(change.availabilityChanged && !schedule.isOnline)
        #expect(schedule.nextPoll == 35)
        change = schedule.failed(start: 35, problem: "timed out")
        #expect(change.worthLogging && !change.availabilityChanged)
        #expect(schedule.nextPoll == 65, "capped at maxBackoff")
        change = schedule.succeeded(start: 65)
        #expect(change.availabilityChanged && change.worthLogging && schedule.isOnline)
        #expect(schedule.consecutiveFailures == 0)
        #expect(schedule.nextPoll == 70)
        #expect(!schedule.succeeded(start: 70).worthLogging)
    }
}
