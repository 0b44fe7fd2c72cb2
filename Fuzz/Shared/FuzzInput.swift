// The fuzzer's bytes read as decisions (shared by every target in Fuzz/).

// MARK: - Input

/// Reads the fuzzer's bytes as decisions; past the end every read gives 0, so
/// every generator below terminates with its smallest choice.
struct FuzzInput {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    var isExhausted: Bool { index >= bytes.count }

    mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    /// A number in 0..<n (n ≤ 65536).
    mutating func below(_ n: Int) -> Int {
        guard n > 1 else { return 0 }
        if n <= 256 { return Int(byte()) % n }
        return (Int(byte()) << 8 | Int(byte())) % n
    }

    /// True with probability 1/n.
    mutating func oneIn(_ n: Int) -> Bool { below(n) == 0 }

    mutating func uint16() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }
    mutating func uint32() -> UInt32 { UInt32(uint16()) | UInt32(uint16()) << 16 }
    mutating func uint64() -> UInt64 { UInt64(uint32()) | UInt64(uint32()) << 32 }

    mutating func take(_ n: Int) -> [UInt8] { (0..<n).map { _ in byte() } }

    /// Everything not read yet.
    mutating func rest() -> UnsafeBufferPointer<UInt8>.SubSequence {
        defer { index = bytes.count }
        return bytes[min(index, bytes.count)...]
    }
}
