/// A small seeded pseudo-random generator (SplitMix64): the same seed gives the same numbers on
/// every machine and every run, which is what makes an interleaving seed, or a decoder test's
/// random values, a replay.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// The generator whose numbers `seed` fixes.
    public init(seed: UInt64) { state = seed }

    /// The next number.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (bound > 0), without modulo bias worth caring about here.
    public mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0)
        return Int(next() % UInt64(bound))
    }

    /// True with probability `percent` / 100.
    public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    /// One of `choices`, each with its weight (weights > 0 in total).
    public mutating func weighted<T>(_ choices: [(T, Int)]) -> T {
        let total = choices.reduce(0) { $0 + max(0, $1.1) }
        var pick = below(total)
        for (choice, weight) in choices where weight > 0 {
            if pick < weight { return choice }
            pick -= weight
        }
        return choices[choices.count - 1].0
    }
}
