import Foundation
import Testing
@testable import BridgeCore

@Suite struct VocabularyTests {
    @Test func numbersHaveThreeSignificantDigits() {
        #expect(SensorValue.number(25.7).mqttPayload == "25.7")
        #expect(SensorValue.number(25.0).mqttPayload == "25.0")
        #expect(SensorValue.number(55.24).mqttPayload == "55.2")
        #expect(SensorValue.number(26.96).mqttPayload == "27.0")
        #expect(SensorValue.number(5.123).mqttPayload == "5.12")
        #expect(SensorValue.number(100.4).mqttPayload == "100")
        #expect(SensorValue.number(0).mqttPayload == "0.00")
        #expect(SensorValue.number(-3.14159).mqttPayload == "-3.14")
    }

    @Test func seedWordsAndMQTTPayloads() {
        #expect(SensorValue.binary(true).seedText(for: .lights) == "On")
        #expect(SensorValue.binary(false).seedText(for: .lights) == "Off")
        #expect(SensorValue.binary(true).seedText(for: .movement) == "Detected")
        #expect(SensorValue.binary(false).seedText(for: .movement) == "Not-Detected")
        #expect(SensorValue.binary(true).seedText(for: .gas) == "Gas")
        #expect(SensorValue.binary(false).seedText(for: .gas) == "Okey")
        #expect(SensorValue.binary(true).mqttPayload == "ON")
        #expect(SensorValue.binary(false).mqttPayload == "OFF")
    }

    @Test func iconsAreIdsForNumbersAndWordsForTheRest() {
        #expect(SensorValue.number(25.7).seedIcon(for: .temperature) == "temperature")
        #expect(SensorValue.number(55).seedIcon(for: .humidity) == "humidity")
        #expect(SensorValue.binary(false).seedIcon(for: .gas) == "Okey")
        #expect(SensorValue.binary(true).seedIcon(for: .lights) == "On")
    }

    @Test func sensorKindsByNameInAnyCase() {
        #expect(SensorKind(name: "Temperature") == .temperature)
        #expect(SensorKind(name: "GAS") == .gas)
        #expect(SensorKind(name: "Pressure") == nil)
        #expect(SensorKind.temperature.unit == "°C")
        #expect(SensorKind.humidity.unit == "%")
        #expect(SensorKind.lights.unit == nil)
    }

    @Test func defaultSensorSetsFollowTheOriginal() {
        #expect(Room.defaultSensors(forRoomNamed: "Kitchen") == [.temperature, .humidity, .lights, .gas])
        #expect(Room.defaultSensors(forRoomNamed: "bathroom") == [.temperature, .humidity, .lights, .gas])
        #expect(Room.defaultSensors(forRoomNamed: "Garden") == [.temperature, .humidity, .lights, .movement])
    }

    @Test func seedShapesAreExact() {
        let home = Fixtures.home()
        let user = home.users[0]
        #expect(SeedShapes.login(user).serialized
            == #"{"userID":"1","rooms":["livingroom","bathroom","bedroom","kitchen","garden","saloon","babyroom","balcony"]}"#)
        #expect(SeedShapes.loginFailed.serialized == #"{"userID":"0"}"#)
        #expect(SeedShapes.rooms(home.users[1]).serialized.hasPrefix(#"{"rooms":["Garden","Bathroom","#))
        #expect(SeedShapes.rooms(home.users[1]).serialized.contains(#""roomsicon":["garden","bathroom","#))
        let kitchen = SeedShapes.room(user.room(named: "Kitchen")!, user: "1", in: home).serialized
        #expect(kitchen.hasPrefix(#"{"SensorNames":["Temperature","Humidity","Lights","Gas"],"SensorIcon":["temperature","humidity","Off","Okey"],"SensorValues":[""#))
        #expect(SeedShapes.error("Not found").serialized == #"{"error":{"message":"Not found"}}"#)
    }

    @Test func jsonEscapesStrings() {
        let value = JSONValue.object([("a\"b", .string("line\nbreak\u{1}\\")), ("n", .number(1.5)), ("i", .integer(3))])
        #expect(value.serialized == #"{"a\"b":"line\nbreak\u0001\\","n":1.5,"i":3}"#)
    }

    @Test func jsonKeepsTextWithoutEscapesAsItIs() {
        let value = JSONValue.object([("Çalışma odası", .string("26.5 °C")), ("", .string("")),
                                      ("tab", .string("a\tb")), ("emoji", .string("💡 on"))])
        #expect(value.serialized == #"{"Çalışma odası":"26.5 °C","":"","tab":"a\tb","emoji":"💡 on"}"#)
    }

    /// Payloads must stay byte for byte what printf's `%.Nf` gave (the original backend's format),
    /// ties and the edges of each decade included.
    @Test func threeSignificantDigitsMatchPrintf() {
        var values: [Double] = [0.125, 2.675, 0.5, 999.5, 1000.5, 9.995, 99.95, 0.0995, -0.0, 1e-7, 1e20,
                                -1e300, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 12_345.678, -0.001234]
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<2_000 {
            values.append(Double.random(in: -200...200, using: &generator))
            values.append(Double(Int.random(in: -2_000...2_000, using: &generator)) / 8)
        }
        for value in values {
            let magnitude = value == 0 ? 0 : Int(floor(log10(abs(value))))
            let expected = String(format: "%.\(max(0, 2 - magnitude))f", value)
            #expect(SensorValue.threeSignificantDigits(value) == expected, "\(value)")
        }
        #expect(SensorValue.threeSignificantDigits(.nan) == "0")
        #expect(SensorValue.threeSignificantDigits(0.125) == "0.125")
        #expect(SensorValue.threeSignificantDigits(999.5) == "1000")
    }

    @Test func fixedDecimalsMatchPrintfOnBothPaths() {
        var generator = SeededGenerator(seed: 11)
        var rounded = 0
        for _ in 0..<5_000 {
            let decimals = Int.random(in: 0...6, using: &generator)
            let scale = pow(10, Double(Int.random(in: 0...4, using: &generator)))
            let value = Double.random(in: -1000...1000, using: &generator) / scale
            let expected = String(format: "%.\(decimals)f", value)
            if let text = FixedDecimals.integerRounded(value, decimals: decimals) {
                rounded += 1
                #expect(text == expected, "\(value) with \(decimals)")
            }
            #expect(FixedDecimals.printed(value, decimals: decimals) == expected, "\(value) with \(decimals)")
        }
        #expect(rounded > 1_000, "the integer path serves most of these")
        #expect(FixedDecimals.integerRounded(25.74, decimals: 1) == "25.7")
        #expect(FixedDecimals.integerRounded(0.05, decimals: 2) == "0.05")
        #expect(FixedDecimals.integerRounded(-0.0, decimals: 2) == "-0.00")
        #expect(FixedDecimals.integerRounded(7, decimals: 0) == "7")
        #expect(FixedDecimals.integerRounded(0.125, decimals: 2) == nil, "a tie is left to printf")
        #expect(FixedDecimals.integerRounded(2e6, decimals: 0) == nil)
    }
}
