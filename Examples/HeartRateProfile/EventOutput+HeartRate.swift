/// The examples' per-value lines (the central's reading, the peripheral's notification), written
/// straight from the measurement.
extension EventOutput {
    /// Prints a heart rate reading: the line `emit("heartRate", fields, human: reading.summary)`
    /// prints with `bpm`, `energyExpended` (when present) and `rrIntervals` in seconds (when
    /// any), byte for byte.
    ///
    /// The central prints one per notification: going through a dictionary of `any Sendable`
    /// (hashing, dynamic casts, sorting the keys) cost about 15,000 instructions a reading, a
    /// third of what the library spends receiving it; this writes the fields in their sorted
    /// order with no dictionary.
    public func emit(heartRate reading: HeartRateMeasurement) {
        Self.writeToStandardOutput(line(heartRate: reading))
    }

    /// The bytes ``emit(heartRate:)`` writes, the newline included.
    package func line(heartRate reading: HeartRateMeasurement) -> [UInt8] {
        guard json else { return line("heartRate", human: reading.summary) }
        var line: [UInt8] = []
        line.reserveCapacity(96)
        // Keys in the order their UTF-8 sorts: bpm, energyExpended, event, rrIntervals.
        line.append(contentsOf: #"{"bpm":"#.utf8)
        line.append(contentsOf: String(reading.beatsPerMinute).utf8)
        if let energy = reading.energyExpended {
            line.append(contentsOf: #","energyExpended":"#.utf8)
            line.append(contentsOf: String(energy).utf8)
        }
        line.append(contentsOf: #","event":"heartRate""#.utf8)
        if !reading.rrIntervals.isEmpty {
            line.append(contentsOf: #","rrIntervals":["#.utf8)
            for (index, interval) in reading.rrIntervals.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                Self.appendDouble(HeartRateMeasurement.seconds(ofRRInterval: interval), to: &line)
            }
            line.append(UInt8(ascii: "]"))
        }
        line.append(contentsOf: "}\n".utf8)
        return line
    }

    /// Prints the peripheral's line for a measurement it sent to `centrals` subscribers: the line
    /// `emit("notified", ["bpm": …, "centrals": …], human: …)` prints, byte for byte, without the
    /// dictionary (about 9,500 instructions a line that way, on every tick).
    public func emit(notified reading: HeartRateMeasurement, centrals: Int) {
        Self.writeToStandardOutput(line(notified: reading, centrals: centrals))
    }

    /// The bytes ``emit(notified:centrals:)`` writes, the newline included.
    package func line(notified reading: HeartRateMeasurement, centrals: Int) -> [UInt8] {
        guard json else {
            return line(
                "notified",
                human: "\(reading.beatsPerMinute) bpm → \(centrals) central\(centrals == 1 ? "" : "s")")
        }
        var line: [UInt8] = []
        line.reserveCapacity(48)
        line.append(contentsOf: #"{"bpm":"#.utf8)
        line.append(contentsOf: String(reading.beatsPerMinute).utf8)
        line.append(contentsOf: #","centrals":"#.utf8)
        line.append(contentsOf: String(centrals).utf8)
        line.append(contentsOf: #","event":"notified"}"#.utf8)
        line.append(UInt8(ascii: "\n"))
        return line
    }
}
