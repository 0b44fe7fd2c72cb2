import Foundation
import HeartRateProfile
import Testing

@Suite(.timeLimit(.minutes(5))) struct HeartRateMeasurementTests {
    @Test func encodesTheSmallestFormThatHoldsTheRate() {
        #expect(HeartRateMeasurement(beatsPerMinute: 72).encoded() == Data([0x00, 72]))
        #expect(HeartRateMeasurement(beatsPerMinute: 300).encoded() == Data([0x01, 0x2C, 0x01]))
    }

    @Test func encodesContactEnergyAndIntervalsAsTheSpecificationSays() {
        let measurement = HeartRateMeasurement(
            beatsPerMinute: 60, sensorContact: .detected, energyExpended: 0x0102, rrIntervals: [1024, 512])
        #expect(measurement.encoded() == Data([0x1E, 60, 0x02, 0x01, 0x00, 0x04, 0x00, 0x02]))
        #expect(HeartRateMeasurement(beatsPerMinute: 60, sensorContact: .notDetected).encoded() == Data([0x04, 60]))
    }

    @Test func leavesOutIntervalsThatDoNotFit() throws {
        let measurement = HeartRateMeasurement(beatsPerMinute: 60, rrIntervals: Array(repeating: 800, count: 12))
        let value = measurement.encoded(maximumLength: 20)
        #expect(value.count == 20)  // flags + rate + 9 intervals of 2 bytes
        #expect(try HeartRateMeasurement(decoding: value).rrIntervals.count == 9)
        #expect(measurement.encoded(maximumLength: 3).count == 2)  // no room for even one
    }

    @Test(arguments: [
        HeartRateMeasurement(beatsPerMinute: 0),
        HeartRateMeasurement(beatsPerMinute: 255, sensorContact: .detected),
        HeartRateMeasurement(beatsPerMinute: 256, sensorContact: .notDetected, energyExpended: 65535),
        HeartRateMeasurement(beatsPerMinute: 72, energyExpended: 12, rrIntervals: [850, 900, 1]),
    ])
    func roundTrips(_ measurement: HeartRateMeasurement) throws {
        #expect(try HeartRateMeasurement(decoding: measurement.encoded()) == measurement)
    }

    @Test(arguments: [
        Data(), Data([0x00]), Data([0x01, 0x48]), Data([0x08, 0x48, 0x01]), Data([0x10, 0x48, 0x01]),
    ])
    func refusesValuesCutShort(_ value: Data) {
        #expect(throws: HeartRateProfileError.self) { try HeartRateMeasurement(decoding: value) }
    }

    @Test func summarisesForPeople() {
        let measurement = HeartRateMeasurement(
            beatsPerMinute: 72, sensorContact: .detected, energyExpended: 12, rrIntervals: [850])
        #expect(measurement.summary == "72 bpm, sensor contact, 12 kJ, RR 0.83 s")
    }

    @Test func intervalsReadAsPrintfWouldPrintThem() {
        // Every 16-bit interval in 1/1024 s, ties (…0.125, 0.375 s) included: the hand-written
        // formatting must agree with String(format: "%.2f") everywhere.
        for rr in stride(from: 0, through: Int(UInt16.max), by: 1) {
            let measurement = HeartRateMeasurement(beatsPerMinute: 60, rrIntervals: [UInt16(rr)])
            let expected = String(format: "%.2f", Double(rr) / 1024)
            guard measurement.summary.hasSuffix("RR \(expected) s") else {
                Issue.record("\(rr)/1024 s: \(measurement.summary), expected \(expected)")
                return
            }
        }
    }
}
