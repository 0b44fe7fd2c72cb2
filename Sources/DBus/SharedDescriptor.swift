/// A file descriptor closed when the last reference to it goes: the socket's, and each shared
/// ``DescriptorReadiness`` made with it, which keeps it until its `cancelled` has run — so a
/// handler on its way never reaches a number the process has reused. Any thread.
///
/// The dedicated policy needs none: its thread closes the descriptor itself, under the lock
/// its cancel takes (see ``DescriptorReadiness/Wait``).
package final class SharedDescriptor: Sendable {
    /// The descriptor, open for as long as this object lives.
    package let fd: Int32

    /// Owns `fd`.
    package init(_ fd: Int32) { self.fd = fd }

    deinit { SystemCall.close(fd) }
}
