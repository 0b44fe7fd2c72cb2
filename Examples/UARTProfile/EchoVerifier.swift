public import Foundation

/// Checks an echo as it arrives: the received bytes, in order, must be the first `expected`
/// bytes of the pattern, no more. Chunk boundaries do not matter (the peripheral may cut the
/// echo differently from what was sent).
public struct EchoVerifier: Sendable {
    /// Where an echo went wrong.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The byte at `offset` was `received`, not `expected`: lost, repeated or reordered data.
        case mismatch(offset: Int, expected: UInt8, received: UInt8)
        /// More came back than was sent.
        case tooLong(received: Int, expected: Int)
        /// A frame of the GATT mode was wrong (``FrameVerifier``).
        case frame(FrameVerifier.Failure)

        /// A sentence for the error line.
        public var description: String {
            switch self {
            case .mismatch(let offset, let expected, let received):
                "byte \(offset) of the echo is \(received), not \(expected): data was lost, repeated or reordered"
            case .tooLong(let received, let expected):
                "\(received) bytes came back where \(expected) were sent"
            case .frame(let failure):
                failure.description
            }
        }
    }

    /// Where the echo stands.
    public enum Status: Sendable, Hashable {
        /// Intact so far; more to come.
        case incomplete
        /// Every byte came back intact.
        case complete
        /// It went wrong (and stays so).
        case failed(Failure)
    }

    /// The pattern that was sent.
    public let pattern: TestPattern
    /// How many bytes were sent.
    public let expected: Int
    /// How many bytes came back so far (all checked).
    public private(set) var received = 0
    /// Where it stands.
    public private(set) var status: Status

    /// A verifier for an echo of the first `expected` bytes of `pattern`.
    public init(pattern: TestPattern, expected: Int) {
        self.pattern = pattern
        self.expected = max(0, expected)
        status = self.expected == 0 ? .complete : .incomplete
    }

    /// Checks the next bytes that came back and returns the new status. Once failed, it stays
    /// failed; bytes after the end fail it too.
    @discardableResult
    public mutating func consume(_ chunk: Data) -> Status {
        if case .failed = status { return status }
        guard !chunk.isEmpty else { return status }
        guard received + chunk.count <= expected else {
            status = .failed(.tooLong(received: received + chunk.count, expected: expected))
            return status
        }
        let wanted = pattern.bytes(received..<received + chunk.count)
        if wanted != chunk {
            let index = zip(wanted, chunk).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? 0
            status = .failed(
                .mismatch(
                    offset: received + index, expected: wanted[wanted.startIndex + index],
                    received: chunk[chunk.startIndex + index]))
            return status
        }
        received += chunk.count
        status = received == expected ? .complete : .incomplete
        return status
    }
}
