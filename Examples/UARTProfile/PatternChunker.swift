public import Foundation

/// Cuts the first `total` bytes of a ``TestPattern`` into chunks for the sender, each as long as
/// the path takes at that moment (a GATT write's maximum length can grow once the link's MTU is
/// known), never longer than what is left: bare (an L2CAP channel) or as ``UARTFrame``s (GATT).
public struct PatternChunker: Sendable {
    /// The bytes sent.
    public let pattern: TestPattern
    /// How many bytes to send in all.
    public let total: Int
    /// How many were handed out so far.
    public private(set) var offset = 0

    /// A chunker for the first `total` bytes of `pattern`.
    public init(pattern: TestPattern, total: Int) {
        self.pattern = pattern
        self.total = max(0, total)
    }

    /// Whether every byte was handed out.
    public var isFinished: Bool { offset >= total }

    /// How many bytes are left.
    public var remaining: Int { total - offset }

    /// The next chunk, at most `maximumLength` bytes (at least 1); nil once all were handed out.
    public mutating func next(maximumLength: Int) -> Data? {
        guard !isFinished else { return nil }
        let length = min(max(1, maximumLength), remaining)
        defer { offset += length }
        return pattern.bytes(offset..<offset + length)
    }

    /// The next chunk as a ``UARTFrame`` of at most `maximumLength` bytes, header included (at
    /// least one byte of payload); nil once all were handed out.
    public mutating func nextFrame(maximumLength: Int) -> Data? {
        let offset = self.offset
        guard let payload = next(maximumLength: maximumLength - UARTFrame.headerLength) else { return nil }
        return UARTFrame.make(offset: offset, payload: payload)
    }
}
