#if canImport(Glibc)
    import Glibc
#endif

/// A value guarded by a POSIX mutex, with the API of `Synchronization.Mutex`.
///
/// For state that threads contend for and that ThreadSanitizer must understand. On Linux
/// `Synchronization.Mutex` hands a contended lock over in its spin loop (in the uninstrumented
/// Synchronization library) or in the kernel (`FUTEX_LOCK_PI`), so TSan sees no happens-before
/// between the two critical sections and reports the guarded accesses as races; only its
/// uncontended fast path, inlined into our code, is visible. TSan intercepts
/// `pthread_mutex_lock` and `pthread_mutex_unlock` and models them exactly.
///
/// `@unchecked Sendable`: `value` is only touched inside `withLock`, with `mutex` held; values
/// go in and out as `sending`, as with `Mutex`.
package final class PosixMutex<Value: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ initialValue: consuming sending Value) {
        value = initialValue
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
