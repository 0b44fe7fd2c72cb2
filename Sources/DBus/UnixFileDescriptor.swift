import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A Unix file descriptor that travels in a D-Bus message (type `h`), with one owner that closes it.
///
/// Ownership: a descriptor read from a message is a fresh duplicate owned by
/// this object, closed on `close()` or deinit unless `take()` moved it out.
/// Appending one to a message makes libdbus duplicate it, so the sender keeps
/// its own copy and closes it as usual.
package final class UnixFileDescriptor: Sendable, Hashable, CustomStringConvertible {
    private let state: PosixMutex<Int32>

    /// Takes ownership of `fd`.
    package init(owning fd: Int32) { state = PosixMutex(fd) }

    /// The descriptor, or -1 once taken or closed. Valid only while this object owns it.
    package var rawValue: Int32 { state.withLock { $0 } }

    /// Moves the descriptor out: the caller now owns and must close it. Returns -1 if already gone.
    package func take() -> Int32 {
        state.withLock { fd in
            defer { fd = -1 }
            return fd
        }
    }

    /// Closes the descriptor now (idempotent).
    package func close() {
        let fd = take()
        if fd >= 0 { SystemCall.close(fd) }
    }

    deinit { close() }

    package static func == (a: UnixFileDescriptor, b: UnixFileDescriptor) -> Bool { a === b }
    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    package var description: String { "fd(\(rawValue))" }
}
