/// A write to a simulated characteristic or descriptor, as its write handler sees it.
///
/// Without a write handler the simulator stores the bytes into the
/// attribute's value at ``offset``.
public struct SimulatedWriteRequest: Sendable, Hashable {
    /// How the central wrote.
    public enum Kind: String, Sendable, Hashable {
        /// A write request (with response).
        case request
        /// A write command (without response).
        case command
        /// A reliable (prepared, then executed) write.
        case reliable
    }

    /// The bytes written.
    public let value: [UInt8]
    /// Where in the attribute's value the bytes go.
    public let offset: Int
    /// Request, command or reliable write.
    public let kind: Kind

    /// A write of `value` at `offset`.
    public init(value: [UInt8], offset: Int, kind: Kind) {
        self.value = value
        self.offset = offset
        self.kind = kind
    }
}
