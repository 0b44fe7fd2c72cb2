import Glibc

/// A weak reference to an app's delegate, read and written under a lock: the `delegate`
/// property of a manager or a peripheral, settable from any thread.
///
/// Generic over the reference's holder (a struct with one `weak var`), as a `weak` property
/// of an existential type (`any SomeDelegate`) cannot be generic.
///
/// `@unchecked Sendable`: the holder is touched only with `mutex` held; the object it names is
/// the app's, handed out as Core Bluetooth's `delegate` properties hand it out, and called by
/// the library only on the queue the app gave for it.
package final class WeakDelegate<Holder>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var holder: Holder

    /// The lock around `holder`; any thread.
    package init(_ holder: Holder) {
        self.holder = holder
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// The holder (and so the delegate, while something else holds it); any thread.
    package var value: Holder {
        get {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return holder
        }
        set {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            holder = newValue
        }
    }
}
