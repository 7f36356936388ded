import Foundation
import Testing
@testable import BridgeCore

/// Sunrise and sunset against published tables, and alarms that follow them (README "Alarms").
@Suite struct SolarEventsTests {
    struct Published: Sendable, CustomStringConvertible {
        var place: String
        var location: GeoLocation
        var zone: TimeZone
        var date: String
        var sunrise: String
        var sunset: String
        /// Minutes: whattime.city names no year (a year moves the times by up to a minute) and prints
        /// whole minutes; USNO's tables are for their year.
        var tolerance = 2.5
        var description: String { "\(place) \(date)" }
    }

    static let berlin = GeoLocation(latitude: 52.52, longitude: 13.41)
    static let london = GeoLocation(latitude: 51.51, longitude: -0.13)
    static let tromso = GeoLocation(latitude: 69.5, longitude: 19.0)

    /// Local clock times as the tables print them.
    /// - Berlin and London: whattime.city's "Sunrise and sunset on the 1st of each month"
    ///   (https://whattime.city/berlin/sun, https://whattime.city/london/sun; 52.52° N 13.41° E and
    ///   51.51° N 0.13° W, Europe/Berlin and Europe/London, summer time included: April and June
    ///   are CEST/BST). The page names no year; the dates are checked in 2026.
    /// - Tromsø: the U.S. Naval Observatory's "Sun and Moon Data for One Day" for Tromsø (E19.0,
    ///   N69.5) in 2014, "Universal Time + 1h" (a fixed offset, no summer time), as quoted at
    ///   https://www.answers.com/Q/How_many_hour_of_daylight_in_north_Norway_in_April.
    static let tables: [Published] = [
        ("2026-01-01", "08:18", "16:03"), ("2026-03-01", "06:55", "17:45"), ("2026-04-01", "06:42", "19:40"),
        ("2026-06-01", "04:51", "21:20"), ("2026-12-01", "07:55", "15:58"),
    ].map { Published(place: "Berlin", location: berlin, zone: TimeZone(identifier: "Europe/Berlin")!,
                      date: $0.0, sunrise: $0.1, sunset: $0.2) }
    + [("2026-01-01", "08:07", "16:01"), ("2026-06-01", "04:51", "21:07"), ("2026-12-01", "07:43", "15:57")]
    .map { Published(place: "London", location: london, zone: TimeZone(identifier: "Europe/London")!,
                     date: $0.0, sunrise: $0.1, sunset: $0.2) }
    + [("2014-04-01", "04:50", "18:49"), ("2014-04-30", "02:29", "20:58"), ("2014-05-17", "00:29", "23:06")]
    .map { Published(place: "Tromsø", location: tromso, zone: TimeZone(secondsFromGMT: 3600)!,
                     date: $0.0, sunrise: $0.1, sunset: $0.2, tolerance: 1.5) }

    static func midnightUTC(_ date: String) -> Date {
        Alarm.parseDate(date + "T00:00:00Z")!
    }

    /// The wall clock's minutes after midnight at `date` in `zone` (as tables print them, summer time included).
    static func localMinutes(_ date: Date, _ zone: TimeZone) -> Double {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = calendar.dateComponents([.hour, .minute, .second, .nanosecond], from: date)
        return Double(parts.hour! * 60 + parts.minute!) + (Double(parts.second!) + Double(parts.nanosecond!) / 1e9) / 60
    }

    static func minutes(_ clock: String) -> Double {
        let parts = clock.split(separator: ":").compactMap { Double($0) }
        return parts[0] * 60 + parts[1]
    }

    @Test(arguments: tables)
    func withinAMinuteOrTwoOfPublishedTables(_ row: Published) throws {
        let midnight = Self.midnightUTC(row.date)
        let sunrise = try SolarEvents.time(of: .sunrise, onDayStarting: midnight, at: row.location).get()
        let sunset = try SolarEvents.time(of: .sunset, onDayStarting: midnight, at: row.location).get()
        let riseError = Self.localMinutes(sunrise, row.zone) - Self.minutes(row.sunrise)
        let setError = Self.localMinutes(sunset, row.zone) - Self.minutes(row.sunset)
        print("solar \(row): sunrise off by \(String(format: "%+.2f", riseError)) min, sunset by \(String(format: "%+.2f", setError)) min")
        #expect(abs(riseError) <= row.tolerance, "\(row) sunrise \(Timestamp.iso8601(sunrise))")
        #expect(abs(setError) <= row.tolerance, "\(row) sunset \(Timestamp.iso8601(sunset))")
    }

    /// Tromsø has midnight sun from 18 May to 25 July and no sun from 28 November to 15 January
    /// (the USNO quote above: "On May 18, the Sun rises at 0013, and sets again ...... 69 DAYS later";
    /// Store norske leksikon, "midnattssol", https://snl.no/midnattssol: Tromsø 18 May–25 July).
    @Test func polarDayAndNightHaveNoEvent() {
        for event in SolarEvents.Event.allCases {
            #expect(SolarEvents.time(of: event, onDayStarting: Self.midnightUTC("2014-06-21"), at: Self.tromso)
                == .failure(.day))
            #expect(SolarEvents.time(of: event, onDayStarting: Self.midnightUTC("2014-12-21"), at: Self.tromso)
                == .failure(.night))
        }
        // Either side of the polar seasons the sun rises and sets again.
        #expect((try? SolarEvents.time(of: .sunset, onDayStarting: Self.midnightUTC("2014-07-28"), at: Self.tromso).get()) != nil)
        #expect((try? SolarEvents.time(of: .sunrise, onDayStarting: Self.midnightUTC("2014-01-20"), at: Self.tromso).get()) != nil)
    }
}

@Suite struct SunAndWeeklyAlarmTests {
    let berlinZone = TimeZone(identifier: "Europe/Berlin")!
    var berlin: AlarmSchedule { AlarmSchedule(timeZone: berlinZone, grace: 600, location: SolarEventsTests.berlin) }
    var tromso: AlarmSchedule {
        AlarmSchedule(timeZone: TimeZone(identifier: "Europe/Oslo")!, grace: 600, location: SolarEventsTests.tromso)
    }

    func date(_ text: String) -> Date { Alarm.parseDate(text)! }

    func alarm(_ fire: String, repeats: Alarm.Repeats = .daily, days: Set<Alarm.Weekday> = [], sun: Alarm.SunTime? = nil,
               enabled: Bool = true) -> Alarm {
        Alarm(uuid: "a", userID: "1", title: "Lights", fireDate: date(fire), isEnabled: enabled, repeats: repeats,
              action: nil, days: days, sun: sun)
    }

    /// Runs the decision every minute from `start` for `days` days, as the scheduler does; returns
    /// what fired and what was skipped, with reasons.
    func simulate(_ alarm: Alarm, from start: String, days: Int, schedule: AlarmSchedule, step: TimeInterval = 60)
        -> (fired: [Date], skipped: [(Date, AlarmSchedule.SkipReason)])
    {
        var handled = date(start)
        var fired: [Date] = []
        var skipped: [(Date, AlarmSchedule.SkipReason)] = []
        var now = date(start)
        let end = now.addingTimeInterval(Double(days) * 86_400)
        while now < end {
            now = now.addingTimeInterval(step)
            switch schedule.decide(alarm, now: now, handledThrough: handled) {
            case .wait: break
            case .fire(let occurrence):
                #expect(now.timeIntervalSince(occurrence) <= schedule.grace)
                fired.append(occurrence)
                handled = occurrence
            case .skip(let occurrence, let reason):
                skipped.append((occurrence, reason))
                handled = occurrence
            }
        }
        return (fired, skipped)
    }

    @Test func aWeeklyAlarmFiresOnItsDaysOnly() {
        // 2026-11-30 is a Monday; 07:00 in Berlin is 06:00Z in winter.
        let workout = alarm("2026-11-30T06:00:00Z", repeats: .weekly, days: [.mon, .wed, .fri])
        let fired = simulate(workout, from: "2026-11-29T12:00:00Z", days: 14, schedule: berlin).fired
        #expect(fired == ["2026-11-30", "2026-12-02", "2026-12-04", "2026-12-07", "2026-12-09", "2026-12-11"]
            .map { date($0 + "T06:00:00Z") })
        // From a Friday evening the next one is Monday.
        #expect(berlin.nextOccurrence(of: workout, after: date("2026-12-04T18:00:00Z")) == date("2026-12-07T06:00:00Z"))
    }

    @Test func aSunsetAlarmFollowsTheSunWithItsOffsetAcrossDaylightSaving() throws {
        // Sunset − 30 min, daily, around the spring change (Berlin went to CEST on 2026-03-29).
        let evening = alarm("2026-03-27T12:00:00Z", sun: .init(event: .sunset, offset: -1800))
        let fired = simulate(evening, from: "2026-03-27T00:00:00Z", days: 4, schedule: berlin).fired
        #expect(fired.count == 4)
        for (index, time) in fired.enumerated() {
            let day = SolarEventsTests.midnightUTC("2026-03-\(27 + index)")
            let sunset = try SolarEvents.time(of: .sunset, onDayStarting: day, at: SolarEventsTests.berlin).get()
            #expect(time == sunset.addingTimeInterval(-1800))
        }
        // In UTC sunset moves on by about two minutes a day; on the local clock it jumps by an hour.
        let local = fired.map { SolarEventsTests.localMinutes($0, berlinZone) }
        #expect(abs(local[2] - local[1] - 60) < 5)
        for pair in zip(fired, fired.dropFirst()) {
            #expect(abs(pair.1.timeIntervalSince(pair.0) - 86_400) < 300)
        }
        // The table: sunset on 1 April is 19:40 CEST, so the alarm's next firing is at 19:10 local.
        let april = berlin.nextOccurrence(of: evening, after: date("2026-04-01T00:00:00Z"))!
        #expect(abs(SolarEventsTests.localMinutes(april, berlinZone) - (19 * 60 + 10)) <= 2)
    }

    @Test func polarNightSkipsTheDaysWithAReasonAndFiresWhenTheSunIsBack() {
        let morning = alarm("2026-11-20T08:00:00Z", sun: .init(event: .sunrise, offset: 0))
        // Five-minute steps, within the grace, so every sunrise fires and each day's decision is reached.
        let run = simulate(morning, from: "2026-11-20T00:00:00Z", days: 70, schedule: tromso, step: 300)
        // Every day of the polar night is skipped once, with the reason; the days around it fire.
        #expect(run.skipped.count >= 40)
        #expect(run.skipped.allSatisfy { $0.1 == .polar(.night) })
        #expect(Set(run.skipped.map(\.0)).count == run.skipped.count)
        #expect(run.fired.count + run.skipped.count == 70)
        #expect(run.fired.contains { $0 < date("2026-11-28T00:00:00Z") })
        #expect(run.fired.contains { $0 > date("2027-01-14T00:00:00Z") })
        // Its answer during the night names the first sunrise after it.
        let next = tromso.nextFire(of: morning, now: date("2026-12-21T12:00:00Z"))
        #expect(next.skipReason == nil)
        #expect(next.date.map { $0 > date("2027-01-10T00:00:00Z") && $0 < date("2027-01-20T00:00:00Z") } == true)
    }

    @Test func answersSayWhenTheAlarmFiresNextOrWhyNot() {
        let now = date("2026-12-01T10:00:00Z")
        #expect(berlin.nextFire(of: alarm("2026-12-01T06:00:00Z"), now: now).date == date("2026-12-02T06:00:00Z"))
        #expect(berlin.nextFire(of: alarm("2026-12-01T06:00:00Z", enabled: false), now: now) == (nil, "disabled"))
        #expect(berlin.nextFire(of: alarm("2026-12-01T06:00:00Z", repeats: .never), now: now) == (nil, "past"))
        let midwinter = alarm("2026-12-21T08:00:00Z", repeats: .never, sun: .init(event: .sunrise, offset: 0))
        #expect(tromso.nextFire(of: midwinter, now: now) == (nil, "the sun does not rise that day"))
        let midsummer = alarm("2026-06-21T20:00:00Z", repeats: .never, sun: .init(event: .sunset, offset: -600))
        #expect(tromso.nextFire(of: midsummer, now: date("2026-06-01T00:00:00Z")) == (nil, "the sun does not set that day"))
        let json = berlin.answer(alarm("2026-12-01T06:00:00Z", repeats: .weekly, days: [.fri, .mon],
                                       sun: .init(event: .sunrise, offset: -1800)), now: now).serialized
        #expect(json.hasPrefix(#"{"uuid":"a","title":"Lights","fireDate":"2026-12-01T06:00:00Z","isEnabled":true,"repeats":"weekly","days":["mon","fri"],"sun":{"event":"sunrise","offset":"-30m"},"nextFire":"2026-12-04T"#), "\(json)")
        #expect(berlin.answer(alarm("2026-12-01T06:00:00Z", repeats: .never), now: now).serialized
            .hasSuffix(#""nextFire":null,"skipReason":"past"}"#))
    }

    @Test func sunFieldsParseAndRoundTrip() throws {
        let rooms = Fixtures.rooms(["Bedroom"])
        let body = #"{"title":"Dusk","fireDate":"2026-12-01T00:00:00Z","repeats":"weekly","days":["FRI","mon"],"sun":{"event":"sunset","offset":"+1h"}}"#
        let draft = try AlarmDraft.parse(Array(body.utf8), rooms: rooms).get()
        #expect(draft.days == [.mon, .fri])
        #expect(draft.sun == Alarm.SunTime(event: .sunset, offset: 3600))
        // An answer, sent back as it came (nextFire and all), gives the same alarm.
        let answer = berlin.answer(draft.alarm(uuid: "u", userID: "1"), now: date("2026-12-01T00:00:00Z")).bytes
        #expect(try AlarmDraft.parse(answer, rooms: rooms).get() == draft)
        // Without a place, the sun is refused by name.
        guard case .failure(let problem) = AlarmDraft.parse(Array(body.utf8), rooms: rooms, sunKnown: false) else {
            Issue.record("a sun alarm was accepted without scheduler.latitude")
            return
        }
        #expect(problem.message.contains("scheduler.latitude"))
        #expect(Alarm.SunTime.parseOffset("-30m") == -1800)
        #expect(Alarm.SunTime.parseOffset("90s") == 90)
        #expect(Alarm.SunTime(event: .sunrise, offset: 5400).offsetText == "90m")
        #expect(Alarm.SunTime(event: .sunrise, offset: 0).offsetText == "0m")
    }
}
