public import Foundation

/// One Heart Rate Measurement (characteristic 0x2A37) as the Heart Rate Service
/// specification lays it out: a flags byte, the rate as 8 or 16 bits, then the
/// optional energy expended and RR intervals.
public struct HeartRateMeasurement: Sendable, Hashable {
    /// Whether the sensor reports skin contact (flags bits 1–2).
    public enum SensorContact: Sendable, Hashable {
        /// The sensor cannot tell (bits 00 or 01).
        case notSupported
        /// Supported, and there is no contact (bits 10).
        case notDetected
        /// Supported, and there is contact (bits 11).
        case detected
    }

    /// Beats per minute.
    public var beatsPerMinute: UInt16
    /// Skin contact as the sensor reports it.
    public var sensorContact: SensorContact
    /// Energy expended since the last reset, in kilojoules, when this measurement carries it.
    public var energyExpended: UInt16?
    /// RR intervals in units of 1/1024 s, oldest first.
    public var rrIntervals: [UInt16]

    /// A measurement; the fields are the specification's.
    public init(
        beatsPerMinute: UInt16, sensorContact: SensorContact = .notSupported, energyExpended: UInt16? = nil,
        rrIntervals: [UInt16] = []
    ) {
        self.beatsPerMinute = beatsPerMinute
        self.sensorContact = sensorContact
        self.energyExpended = energyExpended
        self.rrIntervals = rrIntervals
    }

    /// RR intervals in seconds.
    public var rrIntervalSeconds: [Double] { rrIntervals.map(Self.seconds(ofRRInterval:)) }

    /// One RR interval in seconds (the characteristic counts them in 1/1024 s).
    public static func seconds(ofRRInterval interval: UInt16) -> Double { Double(interval) / 1024 }

    /// The bytes of the characteristic's value: the rate as 8 bits when it fits, else 16;
    /// RR intervals that do not fit the given maximum length are left out (the spec's rule:
    /// the oldest are sent first and the rest wait for the next measurement).
    public func encoded(maximumLength: Int = 20) -> Data {
        // Built in place: a sensor encodes one value per tick, and a `Data` of up to 14 bytes
        // (the usual measurement) is kept inline, without an allocation.
        var value = Data(repeating: 0, count: 1)
        func append16(_ field: UInt16) {
            value.append(UInt8(field & 0xFF))
            value.append(UInt8(field >> 8))
        }
        var flags: UInt8 = 0
        if beatsPerMinute > 0xFF {
            flags |= 0x01
            append16(beatsPerMinute)
        } else {
            value.append(UInt8(beatsPerMinute))
        }
        switch sensorContact {
        case .notSupported: break
        case .notDetected: flags |= 0x04
        case .detected: flags |= 0x06
        }
        if let energyExpended {
            flags |= 0x08
            append16(energyExpended)
        }
        let room = max(0, (maximumLength - value.count) / 2)
        if room > 0, !rrIntervals.isEmpty {
            flags |= 0x10
            for interval in rrIntervals.prefix(room) { append16(interval) }
        }
        value[0] = flags
        return value
    }

    /// Reads a measurement from the characteristic's value.
    ///
    /// - Throws: ``HeartRateProfileError`` when the value is shorter than its flags say, or empty.
    public init(decoding value: Data) throws(HeartRateProfileError) {
        let bytes = Array(value)
        guard let flags = bytes.first else { throw HeartRateProfileError("an empty heart rate measurement") }
        var index = 1
        func take16() throws(HeartRateProfileError) -> UInt16 {
            guard index + 2 <= bytes.count else {
                throw HeartRateProfileError("a heart rate measurement of \(bytes.count) bytes is cut short")
            }
            defer { index += 2 }
            return UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
        }
        if flags & 0x01 != 0 {
            beatsPerMinute = try take16()
        } else {
            guard bytes.count > 1 else { throw HeartRateProfileError("a heart rate measurement without a rate") }
            beatsPerMinute = UInt16(bytes[1])
            index = 2
        }
        switch (flags >> 1) & 0x03 {
        case 0x02: sensorContact = .notDetected
        case 0x03: sensorContact = .detected
        default: sensorContact = .notSupported
        }
        energyExpended = flags & 0x08 != 0 ? try take16() : nil
        rrIntervals = []
        if flags & 0x10 != 0 {
            guard (bytes.count - index) % 2 == 0 else {
                throw HeartRateProfileError("RR intervals of an odd length")
            }
            while index < bytes.count { rrIntervals.append(try take16()) }
        }
    }

    /// "72 bpm, sensor contact, 12 kJ, RR 0.83 s": the human line.
    public var summary: String {
        var parts = ["\(beatsPerMinute) bpm"]
        switch sensorContact {
        case .detected: parts.append("sensor contact")
        case .notDetected: parts.append("no sensor contact")
        case .notSupported: break
        }
        if let energyExpended { parts.append("\(energyExpended) kJ") }
        if !rrIntervals.isEmpty {
            parts.append("RR " + rrIntervalSeconds.map { Self.format($0, 2) + " s" }.joined(separator: " "))
        }
        return parts.joined(separator: ", ")
    }

    /// `value` with `digits` decimals, as `String(format: "%.Nf")` gives it (ties to even), by
    /// hand: Foundation's formatting made the human lines cost twice the JSON ones per reading.
    static func format(_ value: Double, _ digits: Int) -> String {
        let scale = (0..<max(digits, 0)).reduce(1) { product, _ in product * 10 }
        let scaled = (value.magnitude * Double(scale)).rounded(.toNearestOrEven)
        guard value.isFinite, scaled < 1e15 else { return String(format: "%.\(digits)f", value) }
        let units = Int(scaled)
        var text = (value.sign == .minus && units != 0 ? "-" : "") + String(units / scale)
        if digits > 0 {
            let fraction = String(units % scale)
            text += "." + String(repeating: "0", count: digits - fraction.count) + fraction
        }
        return text
    }
}

/// A value of the heart rate profile that cannot be read.
public struct HeartRateProfileError: Error, Sendable, CustomStringConvertible {
    /// What is wrong with it.
    public let description: String
    init(_ description: String) { self.description = description }
}
