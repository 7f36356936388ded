import BridgeCore
import BridgeStorage
import Foundation
import Testing
@testable import BridgeRuntime

/// The scheduler holds only the alarms due soon (README "Alarms", "Limits and pages"), on a real
/// SQLite database, driven by a clock the test sets.
@Suite struct AlarmSchedulerTests {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("scheduler-\(UUID().uuidString)")

    static func time(_ text: String) -> Date { Alarm.parseDate(text)! }

    @Test func twoThousandAlarmsStillFireTheDueOneAndOnlyTheSoonOnesAreHeld() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = try Database(path: folder.appendingPathComponent("bridge.sqlite").path)
        let store = AlarmStore(database: database)
        let fixture = RuntimeFixture()
        let schedule = AlarmSchedule(timeZone: TimeZone(identifier: "UTC")!, grace: 600)
        let scheduler = AlarmScheduler(store: store, schedule: schedule, controller: fixture.controller,
                                       commands: fixture.commands, logger: fixture.logger)
        let created = Self.time("2030-01-01T05:00:00Z")
        // 2,000 daily alarms from 06:30, one every 40 s (till 04:43 the next morning), for user 1
        // (whose cap would be raised for this), and one due at 06:00:30 that switches the kitchen on.
        for index in 0..<2_000 {
            let alarm = Alarm(uuid: "a\(index)", userID: "1", title: "Alarm \(index)",
                              fireDate: Self.time("2030-01-01T06:30:00Z").addingTimeInterval(Double(index) * 40),
                              isEnabled: true, repeats: .daily, action: nil)
            try store.insert(alarm, now: created)
        }
        try store.insert(Alarm(uuid: "due", userID: "1", title: "Kitchen", fireDate: Self.time("2030-01-01T06:00:30Z"),
                               isEnabled: true, repeats: .daily, action: .init(room: "kitchen", lights: .on)), now: created)
        let kitchen = RoomKey(user: "1", room: "kitchen")
        #expect(fixture.store.home.value(of: .lights, in: kitchen) != .binary(true))

        scheduler.tick(now: Self.time("2030-01-01T06:00:00Z"))
        #expect(scheduler.loadedCount == 1, "only the alarm due within 10 minutes is held")
        scheduler.tick(now: Self.time("2030-01-01T06:00:31Z"))
        #expect(fixture.store.home.value(of: .lights, in: kitchen) == .binary(true), "the due alarm fired")
        #expect(scheduler.loadedCount == 0, "its next firing is tomorrow")
        let fired = try #require(try store.scheduled(uuid: "due"))
        #expect(fired.handledThrough == Self.time("2030-01-01T06:00:30Z"))
        #expect(fired.nextCheck == Self.time("2030-01-02T06:00:30Z"))

        // 06:25, a reload: the alarms due by 06:35 (06:30 + 0...7 × 40 s) are held, no more.
        scheduler.tick(now: Self.time("2030-01-01T06:25:00Z"))
        #expect(scheduler.loadedCount == 8)
        scheduler.tick(now: Self.time("2030-01-01T06:30:00Z"))
        #expect(try store.scheduled(uuid: "a0")?.handledThrough == Self.time("2030-01-01T06:30:00Z"), "a0 fired")
        #expect(try store.scheduled(uuid: "a1")?.handledThrough == created, "a1 is not due yet")
        // A reload (60 s after the last): due by 06:40, 06:30 + 0...15 × 40 s, a0 now tomorrow.
        #expect(scheduler.loadedCount == 15)

        // An alarm edited meanwhile counts as edited: moved to 06:31, it fires then, not at 06:30:40.
        var moved = try #require(try store.alarm(uuid: "a1", userID: "1"))
        moved.fireDate = Self.time("2030-01-01T06:31:00Z")
        #expect(try store.update(moved, now: Self.time("2030-01-01T06:30:10Z")))
        scheduler.tick(now: Self.time("2030-01-01T06:30:41Z"))
        #expect(try store.scheduled(uuid: "a1")?.handledThrough == Self.time("2030-01-01T06:30:10Z"))
        scheduler.tick(now: Self.time("2030-01-01T06:31:00Z"))
        #expect(try store.scheduled(uuid: "a1")?.handledThrough == Self.time("2030-01-01T06:31:00Z"))
        // A deleted one is let go without firing.
        #expect(try store.delete(uuid: "a2", userID: "1"))
        scheduler.tick(now: Self.time("2030-01-01T06:31:30Z"))
        // The reload at 06:31 held those due by 06:41 (0...16 × 40 s) but a0 and a1 (tomorrow);
        // a2, due at 06:31:20, was read again, found deleted and let go.
        #expect(scheduler.loadedCount == 14)
        #expect(try store.scheduled(uuid: "a2") == nil)
    }

    @Test func theNextDecisionIsTheFirstOccurrenceAfterWhatWasHandled() {
        let schedule = AlarmSchedule(timeZone: TimeZone(identifier: "UTC")!, grace: 600)
        let weekly = Alarm(uuid: "w", userID: "1", title: "Gym", fireDate: Self.time("2030-01-01T06:30:00Z"),
                           isEnabled: true, repeats: .weekly, action: nil, days: [.mon, .fri])
        // 2030-01-01 is a Tuesday: next Friday the 4th, then Monday the 7th.
        #expect(schedule.nextDecision(of: weekly, after: Self.time("2030-01-01T00:00:00Z")) == Self.time("2030-01-04T06:30:00Z"))
        #expect(schedule.nextDecision(of: weekly, after: Self.time("2030-01-04T06:30:00Z")) == Self.time("2030-01-07T06:30:00Z"))
        let once = Alarm(uuid: "o", userID: "1", title: "Once", fireDate: Self.time("2030-01-01T06:30:00Z"),
                         isEnabled: true, repeats: .never, action: nil)
        #expect(schedule.nextDecision(of: once, after: Self.time("2030-01-01T06:00:00Z")) == Self.time("2030-01-01T06:30:00Z"))
        #expect(schedule.nextDecision(of: once, after: Self.time("2030-01-01T06:30:00Z")) == nil)
    }
}
