import Foundation

/// The median, the smallest and the largest of a series of samples, and how many there were:
/// what every row of the benchmark tables shows.
struct Summary: Equatable {
    let median: Double
    let min: Double
    let max: Double
    let count: Int
}

extension Summary {
    /// Nil for no samples. The median of an even count is the mean of the two middle samples.
    init?(_ samples: [Double]) {
        let sorted = samples.sorted()
        guard let first = sorted.first, let last = sorted.last else { return nil }
        let middle = sorted.count / 2
        median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        min = first
        max = last
        count = sorted.count
    }

    /// "MEDIAN MIN MAX COUNT", six decimals; "nan nan nan 0" for no samples.
    static func line(for samples: [Double]) -> String {
        guard let summary = Summary(samples) else { return "nan nan nan 0" }
        let figures = [summary.median, summary.min, summary.max].map { fixed($0, decimals: 6) }
        return (figures + [String(summary.count)]).joined(separator: " ")
    }
}

/// Whether a figure meets a goal that it must not exceed (a ratio, a growth, a count).
enum Verdict: String, Equatable {
    case meets
    case misses

    /// Meets when `value <= goal`; a figure that is not a number misses.
    init(_ value: Double, atMost goal: Double) {
        self = value <= goal ? .meets : .misses
    }
}

/// BlueZKit's figure over the reference's.
func ratio(_ numerator: Double, _ denominator: Double) -> Double {
    numerator / denominator
}

/// The cost of one more unit: (v2 - v1) / (n2 - n1), as (Ir(N2) - Ir(N1)) / (N2 - N1), so that
/// what both runs share (start-up) cancels out.
func slope(from first: (n: Double, value: Double), to second: (n: Double, value: Double)) -> Double {
    (second.value - first.value) / (second.n - first.n)
}

/// A sample as the scripts write it ("14.8190", "1024", "nan"); nil when it is not a number.
func number(_ text: String) -> Double? {
    Double(text.trimmingCharacters(in: .whitespaces))
}

/// `value` with `decimals` digits after the point, as printf's "%.Nf".
func fixed(_ value: Double, decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}
