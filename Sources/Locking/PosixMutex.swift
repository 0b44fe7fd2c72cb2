#if canImport(Glibc)
    package import Glibc
#endif

/// A value guarded by a POSIX mutex, with the API of `Synchronization.Mutex`: the package's lock,
/// used everywhere instead of `Mutex` (every module and the tests, through `package` access),
/// because ThreadSanitizer must understand every lock. A module of its own, below `DBus`: a lock
/// is no D-Bus type, and `BlueZKit` imports nothing of the D-Bus layer.
///
/// On Linux `Synchronization.Mutex` inlines only its uncontended compare-exchange into our
/// (instrumented) code. A contended lock is handed over in `_lockSlow`'s spin loop (in the
/// uninstrumented Synchronization library) or by the kernel (`FUTEX_LOCK_PI` /
/// `FUTEX_UNLOCK_PI`), so TSan sees no happens-before between the two critical sections and
/// reports the accesses they guard as races — a false report for every lock two threads ever
/// wait on, which would bury real ones. Two threads appending to an array under `Mutex`,
/// compiled with `-sanitize=thread` (Swift 6.3.1), are reported; the same loop under
/// `pthread_mutex_lock` is clean. TSan intercepts `pthread_mutex_lock` and
/// `pthread_mutex_unlock` and models them exactly (lock-order inversions included). Glibc's
/// mutex is a futex too, so the cost is about the same; the mutex lives in its own allocation,
/// since a `pthread_mutex_t` must not move.
///
/// `@unchecked Sendable`: the value is only touched inside `withLock`, with `mutex` held; values
/// go in and out as `sending`, as with `Mutex`.
package final class PosixMutex<Value: ~Copyable>: @unchecked Sendable {
    // Both live outside the object: a `pthread_mutex_t` must not move, and a value reached through
    // a pointer needs no dynamic exclusivity check (a stored `var` of a class costs a
    // `swift_beginAccess` on every `withLock`). `@usableFromInline` so that `withLock` inlines
    // into the caller's module, specialized, like `Mutex.withLock`.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let storage: UnsafeMutablePointer<Value>

    package init(_ initialValue: consuming sending Value) {
        storage = .allocate(capacity: 1)
        storage.initialize(to: initialValue)
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        storage.deinitialize(count: 1)
        storage.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    @inlinable
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&storage.pointee)
    }
}
