#if canImport(Glibc)
    import Glibc
#endif

/// Work that a connection's reading thread runs itself once it has left the connection's queue:
/// how a layer above hands an event on to another serial queue without waking a second thread.
///
/// A D-Bus connection's reading thread (``DescriptorReadiness/Delivery/dedicated(_:)`` with
/// ``DescriptorReadiness/Wait/poll``) handles each wake-up inside `queue.sync`. A handler that
/// would pass a result to another queue with `async` wakes one of libdispatch's workers for it,
/// and on a machine with one CPU that worker preempts the reading thread as well. Handed to
/// ``enqueue(_:)`` instead, the work runs on the reading thread right after its `queue.sync`
/// returns — outside the connection's queue, so the work may itself `sync` onto another queue
/// (or onto the connection's, from code it calls) without a deadlock.
///
/// Only the thread itself touches its list (a thread-specific value), so it needs no lock. Work
/// is taken only while the thread runs a handler of its event; anywhere else (another thread,
/// the work itself, a thread of another kind) ``enqueue(_:)`` answers false and the caller does
/// what it did before.
package enum WorkAfterEvent {
    /// The name of the threads that run work handed to them: a connection's two reading threads
    /// (seen in `top -H`, in profiles, and by tests that check where a delegate ran). Within
    /// Linux's 15 characters.
    package static let readingThreadName = "BlueZKit bus"

    /// Hands `work` to the current thread to run once it leaves the queue of the event it is
    /// handling, after any work handed to it before, in order; true when taken. False when the
    /// current thread is not a connection's reading thread inside an event's handler.
    package static func enqueue(_ work: @escaping @Sendable () -> Void) -> Bool {
        guard let list = List.current, list.accepting else { return false }
        list.items.append(work)
        return true
    }

    /// One thread's list. Used by that thread alone.
    final class List {
        var accepting = false
        var items: [@Sendable () -> Void] = []

        /// The calling thread's list, if it has one.
        static var current: List? {
            guard let key, let pointer = pthread_getspecific(key) else { return nil }
            return Unmanaged<List>.fromOpaque(pointer).takeUnretainedValue()
        }

        /// Gives the calling thread a list until ``uninstall()``; nil when the process has no
        /// thread-specific key left (the thread then works as if it had no list).
        static func install() -> List? {
            guard let key else { return nil }
            let list = List()
            guard pthread_setspecific(key, Unmanaged.passRetained(list).toOpaque()) == 0 else {
                Unmanaged.passUnretained(list).release()
                return nil
            }
            return list
        }

        /// Takes the calling thread's list away (its work not run is dropped).
        static func uninstall() {
            guard let key, let pointer = pthread_getspecific(key) else { return }
            pthread_setspecific(key, nil)
            Unmanaged<List>.fromOpaque(pointer).release()
        }

        /// Runs `handle` taking work, then the work it was handed, in order: called by the
        /// thread with its queue's `sync` as `handle`. Work handed to the thread while it runs
        /// that work is not taken (its callers fall back), so a list never grows while it runs.
        func run(_ handle: () -> Void) {
            accepting = true
            handle()
            accepting = false
            guard !items.isEmpty else { return }
            let taken = items
            items.removeAll(keepingCapacity: true)
            for work in taken { work() }
        }

        /// The key of every thread's list, made once; nil if the process has none left.
        private static let key: pthread_key_t? = {
            var key = pthread_key_t()
            // No destructor: the thread uninstalls its list itself on its way out.
            return pthread_key_create(&key, nil) == 0 ? key : nil
        }()
    }
}
