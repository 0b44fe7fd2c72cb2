import Foundation
import HeartRateProfile
import Testing

/// The examples' hand-written JSON lines must be JSON a parser accepts, with the same values.
@Suite(.timeLimit(.minutes(5))) struct EventOutputTests {
    @Test(arguments: ["plain", "quote \" and backslash \\", "new\nline\ttab\r", "\u{01}\u{1F}", "emoji 🫀 é", ""])
    func stringsSurviveAJSONParser(_ text: String) throws {
        let encoded = EventOutput.encode(text)
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(encoded)]".utf8)) as? [String]
        #expect(decoded == [text])
    }

    @Test func numbersArraysAndNull() throws {
        let fields: [(any Sendable, String)] = [
            (72, "72"), (0.72265625, "0.72265625"), (true, "true"), (NSNull(), "null"), (Double.nan, "null"),
            ([1, 2], "[1,2]"), (["a", "b"], "[\"a\",\"b\"]"), ([0.5, 1.25], "[0.5,1.25]"),
        ]
        for (value, expected) in fields { #expect(EventOutput.encode(value) == expected) }
    }

    @Test func linesSortTheirKeysWithTheEventAmongThem() throws {
        let output = EventOutput(json: true)
        let line = output.line("heartRate", ["z": 1, "a": "x", "eventual": [0.5], "Zeta": true], human: "unused")
        #expect(
            String(decoding: line, as: UTF8.self)
                == #"{"Zeta":true,"a":"x","event":"heartRate","eventual":[0.5],"z":1}"# + "\n")
        #expect(
            String(decoding: output.line("scanning", human: "unused"), as: UTF8.self) == #"{"event":"scanning"}"# + "\n"
        )
        let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
        #expect(object?["event"] as? String == "heartRate")
        #expect(
            String(decoding: EventOutput(json: false).line("x", ["a": 1], human: "72 bpm"), as: UTF8.self) == "72 bpm\n"
        )
    }

    /// The reading line written straight from the measurement is byte for byte what the general
    /// path prints for the fields the central used to build (and still valid JSON).
    @Test func readingLinesAreTheGeneralLines() throws {
        var readings: [HeartRateMeasurement] = []
        for bpm: UInt16 in [0, 1, 72, 255, 256, 300, .max] {
            for energy: UInt16? in [nil, 0, 120, .max] {
                for rr: [UInt16] in [[], [0], [1024], [800, 801], [1, 512, 65535, 333]] {
                    for contact: HeartRateMeasurement.SensorContact in [.notSupported, .notDetected, .detected] {
                        readings.append(
                            HeartRateMeasurement(
                                beatsPerMinute: bpm, sensorContact: contact, energyExpended: energy, rrIntervals: rr))
                    }
                }
            }
        }
        for json in [true, false] {
            let output = EventOutput(json: json)
            for reading in readings {
                var fields: [String: any Sendable] = ["bpm": Int(reading.beatsPerMinute)]
                if let energy = reading.energyExpended { fields["energyExpended"] = Int(energy) }
                if !reading.rrIntervals.isEmpty { fields["rrIntervals"] = reading.rrIntervalSeconds }
                let general = output.line("heartRate", fields, human: reading.summary)
                #expect(output.line(heartRate: reading) == general, "\(reading), json \(json)")
            }
        }
        let line = EventOutput(json: true).line(heartRate: readings[readings.count - 1])
        let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
        #expect(object?["bpm"] as? Int == Int(UInt16.max))
        let seconds: [Double] = [1, 512, 65535, 333].map { $0 / 1024 }
        #expect(object?["rrIntervals"] as? [Double] == seconds)
    }

    /// The same for the peripheral's line of a measurement sent.
    @Test func notifiedLinesAreTheGeneralLines() {
        for json in [true, false] {
            let output = EventOutput(json: json)
            for bpm: UInt16 in [0, 9, 10, 72, 255, 256, .max] {
                for centrals in 0...3 {
                    let reading = HeartRateMeasurement(beatsPerMinute: bpm)
                    let general = output.line(
                        "notified", ["bpm": Int(bpm), "centrals": centrals],
                        human: "\(bpm) bpm → \(centrals) central\(centrals == 1 ? "" : "s")")
                    #expect(output.line(notified: reading, centrals: centrals) == general, "\(bpm) \(centrals) \(json)")
                }
            }
        }
    }
}
