public import Foundation

/// The bytes the central sends: a deterministic pseudo-random sequence, the same for a given
/// seed on both sides, so an echo can be checked byte for byte without keeping what was sent.
///
/// Byte `i` is byte `i % 8` (little-endian) of SplitMix64 applied to `seed + i / 8`: no short
/// period, so a lost, repeated or reordered chunk shows as a mismatch at its offset.
public struct TestPattern: Sendable, Hashable {
    /// What the sequence is derived from.
    public let seed: UInt64

    /// The pattern for `seed`.
    public init(seed: UInt64 = 0x4E55_5320_4543_484F) { self.seed = seed }

    /// The byte at `offset` (0 or more).
    public func byte(at offset: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: word(offset / 8) >> (UInt64(offset % 8) * 8))
    }

    /// The bytes at `offsets`, in order.
    public func bytes(_ offsets: Range<Int>) -> Data {
        var result = Data(count: offsets.count)
        result.withUnsafeMutableBytes { raw in
            let out = raw.bindMemory(to: UInt8.self)
            var offset = offsets.lowerBound
            var index = 0
            while offset < offsets.upperBound {
                var value = word(offset / 8) >> (UInt64(offset % 8) * 8)
                // The rest of this word, as far as the range goes.
                let end = min(offsets.upperBound, (offset / 8 + 1) * 8)
                while offset < end {
                    out[index] = UInt8(truncatingIfNeeded: value)
                    value >>= 8
                    offset += 1
                    index += 1
                }
            }
        }
        return result
    }

    /// SplitMix64 of word number `index`.
    private func word(_ index: Int) -> UInt64 {
        var z = seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
