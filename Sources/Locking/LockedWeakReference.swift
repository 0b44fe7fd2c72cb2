#if canImport(Glibc)
    import Glibc
#endif

/// A weak reference guarded by a POSIX mutex: a delegate that the app sets from any thread and
/// the library reads from its queues.
///
/// `PosixMutex` cannot hold it: its `withLock` takes and gives values as `sending`, and a
/// delegate (a class the app owns, not `Sendable`) cannot be sent. This type does what a
/// `weak var` under a lock did, in one place, for a class that should otherwise be `Sendable`
/// as the compiler checks it.
///
/// `@unchecked Sendable`: the reference is only read and written with `mutex` held.
package final class LockedWeakReference<Object: AnyObject>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private weak var stored: Object?

    /// A reference to `object` (none by default); may be called on any thread.
    package init(_ object: Object? = nil) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        stored = object
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// The object, or nil once it was released; read and set from any thread.
    package var object: Object? {
        get {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return stored
        }
        set {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            stored = newValue
        }
    }
}
