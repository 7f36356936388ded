import Foundation
import Testing
@testable import BridgeCore

/// `WatchdogRules.decide` with an injected clock (README "Watchdogs").
@Suite struct WatchdogRulesTests {
    let rules = WatchdogRules(timeZone: TimeZone(identifier: "UTC")!)
    let start = Date(timeIntervalSince1970: 1_796_083_200)  // 2026-12-01T00:00:00Z

    func watchdog(_ condition: Watchdog.Condition, value: Double? = nil, for duration: TimeInterval = 60,
                  quiet: Watchdog.QuietHours? = nil) -> Watchdog {
        Watchdog(uuid: "w", userID: "1", title: "Watch", room: "bedroom", sensor: .temperature, condition: condition,
                 value: value, duration: duration, quiet: quiet)
    }

    /// Feeds readings (seconds after `start` → value) and decides every second for `seconds`, as the
    /// monitor does; returns each action with the second it happened.
    func run(_ watchdog: Watchdog, seconds: Int, readings: [Int: Double], from offset: Int = 0,
             state: WatchdogState? = nil) -> [(Int, WatchdogRules.Action)] {
        var observation: SensorObservation?
        var state = state ?? WatchdogState(armedAt: start)
        var actions: [(Int, WatchdogRules.Action)] = []
        for second in offset...(offset + seconds) {
            let now = start.addingTimeInterval(Double(second))
            if let value = readings[second] {
                observation = observation?.noting(.number(value), at: now)
                    ?? SensorObservation(lastReading: now, lastChange: now, value: .number(value))
            }
            let outcome = rules.decide(watchdog, observation: observation, state: state, now: now, watchingSince: start)
            state = outcome.state
            if let action = outcome.action { actions.append((second, action)) }
        }
        return actions
    }

    @Test func silentFiresOncePerSilenceAndRecoversOnTheNextReading() {
        // Readings every 5 s until 100, none until 300, then again until 400, then silence.
        var readings: [Int: Double] = [:]
        for second in stride(from: 0, through: 100, by: 5) { readings[second] = 25 }
        for second in stride(from: 300, through: 400, by: 5) { readings[second] = 25 }
        let actions = run(watchdog(.silent), seconds: 600, readings: readings)
        #expect(actions.map(\.1) == [.fire, .recover, .fire])
        #expect(actions.map(\.0) == [160, 300, 460])
    }

    @Test func unchangedCountsFromTheLastChangeNotTheLastReading() {
        // The same value every 5 s for 200 s fires at 60; a new value at 200 recovers it.
        var readings: [Int: Double] = [:]
        for second in stride(from: 0, through: 195, by: 5) { readings[second] = 25 }
        for second in stride(from: 200, through: 240, by: 5) { readings[second] = Double(second) }
        let actions = run(watchdog(.unchanged), seconds: 240, readings: readings)
        #expect(actions.map(\.1) == [.fire, .recover])
        #expect(actions.map(\.0) == [60, 200])
    }

    @Test func aboveMustHoldForTheWholeDurationAndRecoversBelowTheThreshold() {
        // Above 28 from 10 to 40 (too short), then from 100 until 250.
        var readings: [Int: Double] = [0: 25, 10: 29, 40: 27, 100: 30, 250: 26]
        readings[170] = 31
        let actions = run(watchdog(.above, value: 28), seconds: 300, readings: readings)
        #expect(actions.map(\.1) == [.fire, .recover])
        #expect(actions.map(\.0) == [160, 250])
        let below = run(watchdog(.below, value: 18), seconds: 200, readings: [0: 17, 30: 19, 50: 15])
        #expect(below.map(\.0) == [110])
    }

    @Test func quietHoursHoldItUntilTheyEnd() {
        // Quiet 00:00–00:05 (UTC); a sensor silent from the start would fire at 60, fires at 300.
        let quiet = watchdog(.silent, quiet: Watchdog.QuietHours(from: 0, to: 5))
        #expect(run(quiet, seconds: 400, readings: [0: 25]).map(\.0) == [300])
        // Quiet hours across midnight: 23:50–00:05.
        let wrapped = Watchdog.QuietHours(from: 23 * 60 + 50, to: 5)
        #expect(wrapped.contains(minute: 23 * 60 + 55) && wrapped.contains(minute: 2) && !wrapped.contains(minute: 6))
        #expect(!wrapped.contains(minute: 12 * 60))
    }

    @Test func aFiredStateKeptOverARestartDoesNotFireAgain() {
        // Fired before the restart; after it, still no reading: no second event; a reading recovers it.
        let fired = WatchdogState(phase: .fired, firedAt: start.addingTimeInterval(-30), armedAt: start.addingTimeInterval(-600))
        let actions = run(watchdog(.silent), seconds: 200, readings: [150: 25], state: fired)
        #expect(actions.map(\.1) == [.recover])
        #expect(actions.map(\.0) == [150])
    }

    @Test func silenceIsNotCountedFromBeforeTheBridgeStarted() {
        // Armed long ago, nothing seen since the start: it waits a full `for` from the start.
        let old = WatchdogState(armedAt: start.addingTimeInterval(-86_400))
        #expect(run(watchdog(.silent), seconds: 100, readings: [:], state: old).map(\.0) == [60])
    }
}

@Suite struct WatchdogDraftTests {
    let rooms = Fixtures.rooms(["Bedroom", "Kitchen"])

    func parse(_ json: String) -> Result<WatchdogDraft, APIBody.Problem> {
        WatchdogDraft.parse(Array(json.utf8), rooms: rooms)
    }

    @Test func aValidWatchdogRoundTrips() throws {
        let draft = try parse(#"{"title":"Too warm","room":"Bedroom","sensor":"temperature","condition":"above","value":28,"for":"12h","quiet":{"from":"22:00","to":"07:00"}}"#).get()
        #expect(draft.room == "bedroom" && draft.duration == 43_200 && draft.value == 28)
        #expect(draft.quiet == Watchdog.QuietHours(from: 22 * 60, to: 7 * 60))
        let json = draft.watchdog(uuid: "u", userID: "1").json
        #expect(json.serialized == #"{"uuid":"u","title":"Too warm","room":"bedroom","sensor":"temperature","condition":"above","value":28,"for":"12h","quiet":{"from":"22:00","to":"07:00"},"isEnabled":true}"#)
        #expect(try WatchdogDraft.parse(json.bytes, rooms: rooms).get() == draft)
    }

    @Test(arguments: [
        (#"{"room":"bedroom","sensor":"movement","condition":"silent","for":"1h"}"#, "field \"title\""),
        (#"{"title":"x","room":"attic","sensor":"movement","condition":"silent","for":"1h"}"#, "field \"room\""),
        (#"{"title":"x","room":"bedroom","sensor":"gas","condition":"silent","for":"1h"}"#, "field \"sensor\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"gone","for":"1h"}"#, "field \"condition\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"above","value":1,"for":"1h"}"#, "numeric sensor"),
        (#"{"title":"x","room":"bedroom","sensor":"temperature","condition":"above","for":"1h"}"#, "field \"value\""),
        (#"{"title":"x","room":"bedroom","sensor":"temperature","condition":"above","value":"28","for":"1h"}"#, "field \"value\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"silent","value":3,"for":"1h"}"#, "field \"value\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"silent","for":"soon"}"#, "field \"for\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"silent","for":"31d"}"#, "field \"for\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"silent","for":"1h","quiet":{"from":"22:00"}}"#, "field \"quiet\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"silent","for":"1h","quiet":{"from":"25:00","to":"07:00"}}"#, "field \"quiet\""),
        (#"{"title":"x","room":"bedroom","sensor":"movement","condition":"silent","for":"1h","loud":true}"#, "field \"loud\""),
    ])
    func eachBadFieldIsNamed(json: String, message: String) {
        guard case .failure(let problem) = parse(json) else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(problem.message.contains(message), "\(problem.message)")
    }
}
