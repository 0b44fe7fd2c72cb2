import Foundation
import HeartRateProfile

/// A plausible resting-to-light-exercise heart rate: a slow wave with a little noise, the RR
/// interval that goes with it, and energy expended that grows with the rate.
struct HeartRateModel {
    private(set) var count = 0
    private var energyJoules = 0.0
    /// The noise: a fast generator seeded once from the system's (`SystemRandomNumberGenerator`
    /// makes a `getrandom` system call for every number, and a sensor needs no secrets here).
    private var generator = SplitMix64(seed: UInt64.random(in: .min ... .max))

    /// The next measurement, `elapsed` after the previous one. Energy expended rides along on
    /// every tenth measurement, as the Heart Rate Service specification suggests.
    mutating func next(elapsed: Duration) -> HeartRateMeasurement {
        count += 1
        let (whole, attoseconds) = elapsed.components
        let seconds = Double(whole) + Double(attoseconds) / 1e18
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
}

/// SplitMix64 (Steele, Lea and Flood): a small, fast, statistically sound generator for noise.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
