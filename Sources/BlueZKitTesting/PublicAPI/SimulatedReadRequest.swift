/// A read of a simulated characteristic or descriptor, as its read handler sees it.
///
/// The handler returns the attribute's whole value; the simulator serves the
/// part from ``offset`` on (and answers Invalid Offset past the end).
public struct SimulatedReadRequest: Sendable, Hashable {
    /// The offset the central asked for (`ReadValue`'s `offset` option).
    public let offset: Int

    /// A read request at `offset`.
    public init(offset: Int) { self.offset = offset }
}
