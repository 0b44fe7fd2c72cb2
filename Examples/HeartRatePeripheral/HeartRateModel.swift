import Dispatch
import Foundation
import HeartRateProfile

/// A plausible resting-to-light-exercise heart rate: a slow wave with a little noise, the RR
/// interval that goes with it, and energy expended that grows with the rate.
struct HeartRateModel {
    private(set) var count = 0
    private var energyJoules = 0.0
    private var generator = SystemRandomNumberGenerator()

    /// The next measurement, `elapsed` after the previous one. Energy expended rides along on
    /// every tenth measurement, as the Heart Rate Service specification suggests.
    mutating func next(elapsed: DispatchTimeInterval) -> HeartRateMeasurement {
        count += 1
        let seconds = Self.seconds(elapsed)
        let wave = 12 * sin(Double(count) / 20)
        let bpm = UInt16(max(45, min(190, 78 + wave + Double.random(in: -2...2, using: &generator))).rounded())
        // About 0.1 kJ per second at rest, more as the rate climbs.
        energyJoules += seconds * (Double(bpm) * 1.4)
        let rr = UInt16((60.0 / Double(bpm) * 1024).rounded())
        return HeartRateMeasurement(
            beatsPerMinute: bpm, sensorContact: .detected,
            energyExpended: count % 10 == 0 ? UInt16(min(energyJoules / 1000, Double(UInt16.max))) : nil,
            rrIntervals: [rr])
    }

    /// The control point's "reset energy expended".
    mutating func resetEnergyExpended() { energyJoules = 0 }

    private static func seconds(_ interval: DispatchTimeInterval) -> Double {
        switch interval {
        case .seconds(let s): Double(s)
        case .milliseconds(let ms): Double(ms) / 1000
        case .microseconds(let us): Double(us) / 1_000_000
        case .nanoseconds(let ns): Double(ns) / 1_000_000_000
        default: 1
        }
    }
}
