/// Bytes moved in a time, and how humans read it ("63.2 kB/s", 1 kB = 1,000 bytes).
public struct Throughput: Sendable, Hashable, CustomStringConvertible {
    /// How many bytes.
    public let bytes: Int
    /// In how many seconds.
    public let seconds: Double

    /// `bytes` in `seconds`.
    public init(bytes: Int, seconds: Double) {
        self.bytes = bytes
        self.seconds = seconds
    }

    /// `bytes` in the time from `start` to `end`.
    public init(bytes: Int, from start: ContinuousClock.Instant, to end: ContinuousClock.Instant) {
        let elapsed = end - start
        self.init(
            bytes: bytes,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// Bytes per second, rounded to a whole number; 0 when no time passed.
    public var bytesPerSecond: Int {
        guard seconds > 0, seconds.isFinite else { return 0 }
        return Int((Double(bytes) / seconds).rounded())
    }

    /// "63.2 kB/s" (below 1 kB/s: "512 B/s"; from 1 MB/s on: "1.25 MB/s").
    public var description: String {
        let rate = seconds > 0 && seconds.isFinite ? Double(bytes) / seconds : 0
        if rate < 999.5 { return "\(Int(rate.rounded())) B/s" }
        if rate < 999_950 { return Self.decimal(rate / 1000, digits: 1) + " kB/s" }
        return Self.decimal(rate / 1_000_000, digits: 2) + " MB/s"
    }

    /// `seconds` with two decimals: "1.27 s".
    public var secondsDescription: String { Self.decimal(seconds, digits: 2) + " s" }

    /// `value` (not negative) with `digits` decimals, rounded once, half away from zero (no
    /// Foundation formatting).
    static func decimal(_ value: Double, digits: Int) -> String {
        var scale = 1
        for _ in 0..<digits { scale *= 10 }
        let scaled = Int((max(0, value) * Double(scale)).rounded())
        guard digits > 0 else { return "\(scaled)" }
        let fraction = String(scaled % scale)
        return "\(scaled / scale)." + String(repeating: "0", count: digits - fraction.count) + fraction
    }
}
