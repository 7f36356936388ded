import Foundation
import Testing
@testable import BridgeCore

@Suite struct AlarmScheduleTests {
    let utc = AlarmSchedule(timeZone: TimeZone(identifier: "UTC")!, grace: 600)

    func date(_ text: String) -> Date { Alarm.parseDate(text)! }

    func alarm(_ fire: String, repeats: Alarm.Repeats = .daily, enabled: Bool = true) -> Alarm {
        Alarm(uuid: "a", userID: "1", title: "Wake up", fireDate: date(fire), isEnabled: enabled, repeats: repeats,
              action: nil)
    }

    /// Runs the scheduler's decision every minute over `days` simulated days, remembering what was
    /// handled as the runtime does; returns the occurrences fired.
    func simulate(_ alarm: Alarm, from start: String, days: Int, schedule: AlarmSchedule? = nil) -> [Date] {
        let schedule = schedule ?? utc
        var alarm = alarm
        var handled = date(start)
        var fired: [Date] = []
        var now = date(start)
        let end = now.addingTimeInterval(Double(days) * 86_400)
        while now < end {
            now = now.addingTimeInterval(60)
            switch schedule.decide(alarm, now: now, handledThrough: handled) {
            case .wait: break
            case .fire(let occurrence):
                fired.append(occurrence)
                handled = occurrence
                if alarm.repeats == .never { alarm.isEnabled = false }
            case .skip(let occurrence, _): handled = occurrence
            }
        }
        return fired
    }

    @Test func aDailyAlarmFiresEachDayAtItsTimeAndNeverTwice() {
        let fired = simulate(alarm("2026-12-01T07:00:00Z"), from: "2026-11-30T12:00:00Z", days: 5)
        // From noon on the 30th for five days: the 1st to the 5th, at 07:00 each.
        #expect(fired == (1...5).map { date("2026-12-0\($0)T07:00:00Z") })
        #expect(Set(fired).count == fired.count)
    }

    @Test func aDisabledAlarmNeverFires() {
        #expect(simulate(alarm("2026-12-01T07:00:00Z", enabled: false), from: "2026-11-30T12:00:00Z", days: 3).isEmpty)
    }

    @Test func aOneShotAlarmFiresOnce() {
        let fired = simulate(alarm("2026-12-01T07:00:00Z", repeats: .never), from: "2026-11-30T12:00:00Z", days: 3)
        #expect(fired == [date("2026-12-01T07:00:00Z")])
    }

    @Test func occurrencesBeforeTheAlarmExistedAreNotFired() {
        // Created at 08:00 for a daily 07:00: the first firing is tomorrow.
        let fired = simulate(alarm("2026-12-01T07:00:00Z"), from: "2026-12-01T08:00:00Z", days: 1)
        #expect(fired == [date("2026-12-02T07:00:00Z")])
    }

    @Test func missedWhileDownFiresWithinGraceAndSkipsBeyond() {
        let wake = alarm("2026-12-01T07:00:00Z", repeats: .never)
        let handled = date("2026-11-30T00:00:00Z")
        #expect(utc.decide(wake, now: date("2026-12-01T07:05:00Z"), handledThrough: handled)
            == .fire(occurrence: date("2026-12-01T07:00:00Z")))
        #expect(utc.decide(wake, now: date("2026-12-01T07:30:00Z"), handledThrough: handled)
            == .skip(occurrence: date("2026-12-01T07:00:00Z"), reason: .late))
        #expect(utc.decide(wake, now: date("2026-12-01T06:59:59Z"), handledThrough: handled) == .wait)
        // Down for three days: only the latest daily occurrence is considered, once.
        let daily = alarm("2026-12-01T07:00:00Z")
        #expect(utc.decide(daily, now: date("2026-12-04T07:03:00Z"), handledThrough: date("2026-12-01T07:00:00Z"))
            == .fire(occurrence: date("2026-12-04T07:00:00Z")))
    }

    @Test func dailyAlarmsKeepTheirWallClockTimeAcrossDaylightSaving() {
        let berlin = AlarmSchedule(timeZone: TimeZone(identifier: "Europe/Berlin")!, grace: 600)
        // 07:00 in Berlin is 06:00Z in winter and 05:00Z in summer; DST began 2026-03-29.
        let fired = simulate(alarm("2026-03-27T06:00:00Z"), from: "2026-03-27T00:00:00Z", days: 4, schedule: berlin)
        #expect(fired == [date("2026-03-27T06:00:00Z"), date("2026-03-28T06:00:00Z"), date("2026-03-29T05:00:00Z"),
                          date("2026-03-30T05:00:00Z")])
    }

    @Test func nextOccurrence() {
        #expect(utc.nextOccurrence(of: alarm("2026-12-01T07:00:00Z"), after: date("2026-12-03T08:00:00Z"))
            == date("2026-12-04T07:00:00Z"))
        #expect(utc.nextOccurrence(of: alarm("2026-12-01T07:00:00Z", repeats: .never), after: date("2026-12-03T08:00:00Z"))
            == nil)
    }

    @Test func listsAreOrderedByTimeOfDay() {
        let late = alarm("2026-12-01T21:00:00Z")
        var early = alarm("2026-12-09T06:30:00Z")
        early.title = "Early"
        let now = date("2026-12-01T00:00:00Z")
        #expect(utc.timeOfDayOrder(early, late, now: now))
        #expect(!utc.timeOfDayOrder(late, early, now: now))
    }
}

@Suite struct AlarmDraftTests {
    let rooms = Fixtures.rooms(["Bedroom", "Kitchen"])

    func parse(_ json: String) -> Result<AlarmDraft, APIBody.Problem> {
        AlarmDraft.parse(Array(json.utf8), rooms: rooms)
    }

    @Test func validAlarms() throws {
        let draft = try parse(#"{"title":" Wake up ","fireDate":"2026-12-01T07:00:00Z","isEnabled":false,"repeats":"daily","action":{"room":"Bedroom","lights":"on"}}"#).get()
        #expect(draft.title == "Wake up")
        #expect(draft.repeats == .daily)
        #expect(!draft.isEnabled)
        #expect(draft.action == Alarm.Action(room: "bedroom", lights: .on))
        let minimal = try parse(#"{"title":"x","fireDate":"2026-12-01T07:00:00.250+03:00"}"#).get()
        #expect(minimal.isEnabled && minimal.repeats == .never && minimal.action == nil)
    }

    @Test(arguments: [
        (#"{"fireDate":"2026-12-01T07:00:00Z"}"#, "field \"title\" is required"),
        (#"{"title":"","fireDate":"2026-12-01T07:00:00Z"}"#, "field \"title\""),
        (#"{"title":"   ","fireDate":"2026-12-01T07:00:00Z"}"#, "field \"title\" must be 1 to 100 characters"),
        ("{\"title\":\"\(String(repeating: "x", count: 101))\",\"fireDate\":\"2026-12-01T07:00:00Z\"}", "1 to 100"),
        (#"{"title":"\u0000 hidden","fireDate":"2026-12-01T07:00:00Z"}"#, "field \"title\" must not contain U+0000"),
        // 50 characters, each an "e" with 9 combining accents: 50 × 19 = 950 bytes.
        ("{\"title\":\"\(String(repeating: "e" + String(repeating: "\u{301}", count: 9), count: 50))\","
            + "\"fireDate\":\"2026-12-01T07:00:00Z\"}", "at most 400 bytes"),
        ("{\"title\":\"\(String(repeating: "x", count: 1025))\",\"fireDate\":\"2026-12-01T07:00:00Z\"}",
         "at most 1024 bytes"),
        (#"{"title":"x","fireDate":"tomorrow"}"#, "field \"fireDate\""),
        (#"{"title":"x"}"#, "field \"fireDate\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","repeats":"hourly"}"#, "field \"repeats\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","repeats":"weekly"}"#, "field \"days\" is required"),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","repeats":"weekly","days":[]}"#, "field \"days\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","repeats":"weekly","days":["mon","funday"]}"#, "field \"days\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","repeats":"daily","days":["mon"]}"#, "only for \"repeats\":\"weekly\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sun":"sunrise"}"#, "field \"sun\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sun":{"event":"noon"}}"#, "field \"sun.event\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sun":{"event":"sunset","offset":"soon"}}"#, "field \"sun.offset\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sun":{"event":"sunset","offset":"-7h"}}"#, "field \"sun.offset\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sun":{"event":"sunset","offset":"--1m"}}"#, "field \"sun.offset\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sun":{"event":"sunset","at":"1m"}}"#, "field \"sun.at\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","isEnabled":1}"#, "field \"isEnabled\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","isEnabled":"yes"}"#, "field \"isEnabled\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","action":{"room":"garage","lights":"ON"}}"#, "field \"action.room\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","action":{"room":"kitchen","lights":"DIM"}}"#, "field \"action.lights\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","action":"ON"}"#, "field \"action\""),
        (#"{"title":"x","fireDate":"2026-12-01T07:00:00Z","sound":"bell"}"#, "field \"sound\""),
    ])
    func eachBadFieldIsNamed(json: String, message: String) {
        guard case .failure(let problem) = parse(json) else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(problem.message.contains(message), "\(problem.message)")
    }

    @Test func datesThatDoNotExistAreRefused() {
        #expect(Alarm.parseDate("2026-12-01T07:00:00Z") == Date(timeIntervalSince1970: 1_796_108_400))
        #expect(Alarm.parseDate("2026-12-01T10:00:00+03:00") == Date(timeIntervalSince1970: 1_796_108_400))
        #expect(Alarm.parseDate("2026-12-01T07:00:00.5Z") == Date(timeIntervalSince1970: 1_796_108_400.5))
        for bad in ["2026-12-01T25:99:00+03:00", "2026-02-30T07:00:00Z", "2026-13-01T07:00:00Z", "2026-12-01 07:00:00Z",
                    "2026-12-01T07:00Z", "2026-12-01T07:00:00", "2026-12-01T07:00:60Z", "tomorrow", ""] {
            #expect(Alarm.parseDate(bad) == nil, "\(bad) accepted")
        }
    }

    @Test func jsonShape() {
        let alarm = Alarm(uuid: "u", userID: "1", title: "Wake up", fireDate: Alarm.parseDate("2026-12-01T07:00:00Z")!,
                          isEnabled: true, repeats: .daily, action: .init(room: "bedroom", lights: .on))
        #expect(alarm.json.serialized
            == #"{"uuid":"u","title":"Wake up","fireDate":"2026-12-01T07:00:00Z","isEnabled":true,"repeats":"daily","action":{"room":"bedroom","lights":"ON"}}"#)
    }
}
