import Foundation

/// A place on Earth, for sunrise and sunset (`scheduler.latitude`, `scheduler.longitude`; README "Alarms").
public struct GeoLocation: Sendable, Equatable {
    /// Degrees north (negative: south), −90…90.
    public var latitude: Double
    /// Degrees east (negative: west), −180…180.
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// Sunrise and sunset by NOAA's solar calculator (the "NOAA Solar Calculations" spreadsheet, after
/// Meeus's "Astronomical Algorithms"): the sun's declination and the equation of time for the
/// moment, the hour angle at which the sun's upper limb touches the horizon (zenith 90.833°:
/// refraction and the sun's radius), iterated at the event's own time. Within a minute of published
/// tables outside the polar circles (README "Alarms"; Tests/BridgeCoreTests/SolarEventsTests.swift).
public enum SolarEvents {
    public enum Event: String, Sendable, CaseIterable {
        case sunrise
        case sunset
    }

    /// Why a day has no sunrise or sunset at a place.
    public enum Polar: Error, Sendable, Equatable {
        /// The sun stays below the horizon all day.
        case night
        /// The sun stays above the horizon all day.
        case day

        /// The alarm's `skipReason` (README "Alarms").
        public var reason: String {
            switch self {
            case .night: "the sun does not rise that day"
            case .day: "the sun does not set that day"
            }
        }
    }

    /// The moment of `event` on the calendar day that starts at `midnightUTC` (the day's date at
    /// 00:00 UTC; the caller picks the date in its own time zone), or why there is none.
    public static func time(of event: Event, onDayStarting midnightUTC: Date, at place: GeoLocation)
        -> Result<Date, Polar>
    {
        // Start at local solar noon, then recompute at the estimate: the sun moves a little in between.
        var minutes = 720 - 4 * place.longitude
        for _ in 0..<3 {
            let moment = midnightUTC.addingTimeInterval(minutes * 60)
            let sun = position(julianDay: moment.timeIntervalSince1970 / 86_400 + 2_440_587.5)
            let latitude = radians(place.latitude)
            let cosHourAngle = cos(radians(90.833)) / (cos(latitude) * cos(sun.declination))
                - tan(latitude) * tan(sun.declination)
            if cosHourAngle > 1 { return .failure(.night) }
            if cosHourAngle < -1 { return .failure(.day) }
            let hourAngle = degrees(acos(cosHourAngle))
            let noon = 720 - 4 * place.longitude - sun.equationOfTime
            minutes = event == .sunrise ? noon - 4 * hourAngle : noon + 4 * hourAngle
        }
        return .success(midnightUTC.addingTimeInterval(minutes * 60))
    }

    /// The sun's declination (radians) and the equation of time (minutes) at a Julian day.
    static func position(julianDay: Double) -> (declination: Double, equationOfTime: Double) {
        let t = (julianDay - 2_451_545) / 36_525
        let meanLongitude = (280.46646 + t * (36_000.76983 + t * 0.0003032)).truncatingRemainder(dividingBy: 360)
        let meanAnomaly = 357.52911 + t * (35_999.05029 - 0.0001537 * t)
        let eccentricity = 0.016708634 - t * (0.000042037 + 0.0000001267 * t)
        let m = radians(meanAnomaly)
        let center = sin(m) * (1.914602 - t * (0.004817 + 0.000014 * t)) + sin(2 * m) * (0.019993 - 0.000101 * t)
            + sin(3 * m) * 0.000289
        let omega = radians(125.04 - 1934.136 * t)
        let apparentLongitude = meanLongitude + center - 0.00569 - 0.00478 * sin(omega)
        let meanObliquity = 23 + (26 + (21.448 - t * (46.815 + t * (0.00059 - t * 0.001813))) / 60) / 60
        let obliquity = radians(meanObliquity + 0.00256 * cos(omega))
        let declination = asin(sin(obliquity) * sin(radians(apparentLongitude)))
        let y = pow(tan(obliquity / 2), 2)
        let l0 = radians(meanLongitude)
        let equation = y * sin(2 * l0) - 2 * eccentricity * sin(m) + 4 * eccentricity * y * sin(m) * cos(2 * l0)
            - 0.5 * y * y * sin(4 * l0) - 1.25 * eccentricity * eccentricity * sin(2 * m)
        return (declination, 4 * degrees(equation))
    }

    private static func radians(_ degrees: Double) -> Double { degrees * .pi / 180 }
    private static func degrees(_ radians: Double) -> Double { radians * 180 / .pi }
}
