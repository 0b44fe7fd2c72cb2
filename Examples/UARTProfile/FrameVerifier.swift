public import Foundation

/// Checks the GATT mode's echo: ``UARTFrame``s that may come back in any order, each of which
/// must hold the pattern's bytes at its offset; the transfer is complete when the frames cover
/// the first `expected` bytes exactly once.
///
/// Frames that come early wait (only their offset and length are kept) until the gap before
/// them closes. A frame outside the transfer, one that overlaps another, or one whose bytes
/// differ from the pattern fails the echo: data was corrupted, repeated or cut.
public struct FrameVerifier: Sendable {
    /// Where an echo went wrong.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// Not a frame (`length` bytes, too short for a header and a byte).
        case notAFrame(length: Int)
        /// The byte at `offset` of the transfer was `received`, not `expected`.
        case mismatch(offset: Int, expected: UInt8, received: UInt8)
        /// A frame for bytes `offset..<end` goes past the `expected` bytes sent.
        case outOfRange(offset: Int, end: Int, expected: Int)
        /// A frame for bytes from `offset` on covers bytes that came back already.
        case repeated(offset: Int)

        /// A sentence for the error line.
        public var description: String {
            switch self {
            case .notAFrame(let length): "a notification of \(length) bytes is not a frame"
            case .mismatch(let offset, let expected, let received):
                "byte \(offset) came back as \(received), not \(expected)"
            case .outOfRange(let offset, let end, let expected):
                "a frame for bytes \(offset)..<\(end) came back where \(expected) were sent"
            case .repeated(let offset): "the frame at byte \(offset) came back twice (or overlaps another)"
            }
        }
    }

    /// The pattern that was sent.
    public let pattern: TestPattern
    /// How many bytes were sent.
    public let expected: Int
    /// Bytes that came back intact so far, in or out of order.
    public private(set) var received = 0
    /// Frames that came before one sent earlier.
    public private(set) var framesOutOfOrder = 0
    /// Frames checked.
    public private(set) var frames = 0
    /// Where it stands (``EchoVerifier/Status``).
    public private(set) var status: EchoVerifier.Status
    /// Every byte before this offset came back.
    private var contiguous = 0
    /// Frames beyond `contiguous`, by offset: their lengths.
    private var early: [Int: Int] = [:]

    /// A verifier for an echo of the first `expected` bytes of `pattern`.
    public init(pattern: TestPattern, expected: Int) {
        self.pattern = pattern
        self.expected = max(0, expected)
        status = self.expected == 0 ? .complete : .incomplete
    }

    /// Checks the next frame that came back and returns the new status. Once failed, it stays
    /// failed.
    @discardableResult
    public mutating func consume(_ frame: Data) -> EchoVerifier.Status {
        if case .failed = status { return status }
        guard let (offset, payload) = UARTFrame.parse(frame) else {
            return fail(.notAFrame(length: frame.count))
        }
        let end = offset + payload.count
        guard end <= expected else { return fail(.outOfRange(offset: offset, end: end, expected: expected)) }
        guard offset >= contiguous, !overlapsEarly(offset, end) else { return fail(.repeated(offset: offset)) }
        let wanted = pattern.bytes(offset..<end)
        if wanted != payload {
            let index = zip(wanted, payload).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? 0
            return fail(
                .mismatch(
                    offset: offset + index, expected: wanted[wanted.startIndex + index],
                    received: payload[payload.startIndex + index]))
        }
        frames += 1
        received += payload.count
        if offset == contiguous {
            contiguous = end
            while let length = early.removeValue(forKey: contiguous) { contiguous += length }
        } else {
            framesOutOfOrder += 1
            early[offset] = payload.count
        }
        status = contiguous == expected ? .complete : .incomplete
        return status
    }

    /// Whether `offset..<end` overlaps a frame that came early. Few wait at a time: a scan is enough.
    private func overlapsEarly(_ offset: Int, _ end: Int) -> Bool {
        early.contains { $0.key < end && offset < $0.key + $0.value }
    }

    private mutating func fail(_ failure: Failure) -> EchoVerifier.Status {
        status = .failed(.frame(failure))
        return status
    }
}
