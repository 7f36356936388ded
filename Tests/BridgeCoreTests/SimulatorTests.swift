import Testing
@testable import BridgeCore

@Suite struct SimulatorTests {
    @Test func staysWithinTheContractsRanges() {
        var simulator = Simulator(users: Fixtures.users, seed: 42)
        var readings = simulator.initialReadings()
        for _ in 0..<2_000 { readings += simulator.step() }
        for reading in readings {
            switch (reading.sensor, reading.value) {
            case (.temperature, .number(let value)):
                #expect(Simulator.temperatureRange.contains(value))
                #expect(Simulator.temperatureRange.contains(Double(reading.value.mqttPayload)!))
            case (.humidity, .number(let value)):
                #expect(Simulator.humidityRange.contains(value))
            case (.lights, _), (.movement, .binary), (.gas, .binary):
                break
            default:
                Issue.record("unexpected reading \(reading)")
            }
        }
    }

    @Test func sameSeedSameSequenceOtherSeedOtherSequence() {
        var first = Simulator(users: Fixtures.users, seed: 1234)
        var second = Simulator(users: Fixtures.users, seed: 1234)
        var other = Simulator(users: Fixtures.users, seed: 1235)
        #expect(first.initialReadings() == second.initialReadings())
        #expect(first.initialReadings() != other.initialReadings())
        for _ in 0..<200 {
            let a = first.step()
            #expect(a == second.step())
            _ = other.step()
        }
        #expect(first.step() != other.step())
    }

    @Test func lightsAreNeverSimulated() {
        var simulator = Simulator(users: Fixtures.users, seed: 3)
        #expect(simulator.initialReadings().filter { $0.sensor == .lights }.allSatisfy { $0.value == .binary(false) })
        for _ in 0..<100 { #expect(!simulator.step().contains { $0.sensor == .lights }) }
    }

    @Test func temperatureWalksSlowly() {
        var simulator = Simulator(users: Fixtures.users, seed: 5)
        var previous = simulator.initialReadings().filter { $0.sensor == .temperature }
        for _ in 0..<500 {
            let next = simulator.step().filter { $0.sensor == .temperature }
            for (a, b) in zip(previous, next) {
                guard case .number(let x) = a.value, case .number(let y) = b.value else { continue }
                #expect(abs(x - y) <= Simulator.temperatureStep + 1e-9)
            }
            previous = next
        }
    }

    @Test func movementComesInBurstsAndGasIsRare() {
        var simulator = Simulator(users: Fixtures.users, seed: 99)
        var movementOn = 0, movementTotal = 0, gasOn = 0, gasTotal = 0
        var longestBurst = 0, current = 0
        for _ in 0..<5_000 {
            for reading in simulator.step() {
                if reading.sensor == .movement {
                    movementTotal += 1
                    if reading.value == .binary(true) { movementOn += 1 }
                }
                if reading.sensor == .gas {
                    gasTotal += 1
                    if reading.value == .binary(true) { gasOn += 1 }
                }
                if reading.user == "1", reading.room == "livingroom", reading.sensor == .movement {
                    current = reading.value == .binary(true) ? current + 1 : 0
                    longestBurst = max(longestBurst, current)
                }
            }
        }
        #expect(movementOn > 0 && movementOn < movementTotal / 2)
        #expect(longestBurst >= 2)
        #expect(gasOn > 0)
        #expect(Double(gasOn) / Double(gasTotal) < 0.05)
    }

    func publish(_ tracker: inout PublishTracker, topic: String, payload: String, now: Double) -> Bool {
        tracker.shouldPublish(topic: topic, payload: payload, now: now)
    }

    @Test func trackerPublishesChangesAndRefreshes() {
        var tracker = PublishTracker(refresh: 300)
        #expect(publish(&tracker, topic: "t", payload: "25.7", now: 0) == true)
        #expect(publish(&tracker, topic: "t", payload: "25.7", now: 10) == false)
        #expect(publish(&tracker, topic: "t", payload: "25.8", now: 11) == true)
        #expect(publish(&tracker, topic: "t", payload: "25.8", now: 310) == false)
        #expect(publish(&tracker, topic: "t", payload: "25.8", now: 311) == true)
        #expect(publish(&tracker, topic: "other", payload: "25.8", now: 311) == true)
        tracker.markPublished(topic: "m", payload: "x", now: 400)
        #expect(publish(&tracker, topic: "m", payload: "x", now: 401) == false)
    }
}
