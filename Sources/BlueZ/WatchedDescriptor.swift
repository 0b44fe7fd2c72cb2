import DBus
import Locking

/// A descriptor closed once the last of its watches is cancelled (its `cancelled` ran): the
/// socket counts as one user, each ``DescriptorReadiness`` armed on it as one more, so a handler on
/// its way never reaches a number the process has reused. Used by ``BlueZWriteSocket`` and
/// ``BlueZNotifyLink``; any thread.
final class WatchedDescriptor: Sendable {
    private let fd: Int32
    /// Users left; the descriptor is closed when it reaches 0.
    private let users = PosixMutex(1)

    /// Owns `fd`, with one user (the socket).
    init(_ fd: Int32) { self.fd = fd }

    /// One more user (a watch about to be armed).
    func retain() { users.withLock { $0 += 1 } }

    /// One user less (a watch's `cancelled`, or the socket's only watch); the last closes `fd`.
    func release() {
        let last = users.withLock { users in
            users -= 1
            return users == 0
        }
        if last { SystemCall.close(fd) }
    }
}
