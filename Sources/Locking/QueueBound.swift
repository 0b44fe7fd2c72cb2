package import Dispatch

/// A value that belongs to one serial queue: every read and write checks, at run time, that it
/// runs on that queue (`dispatchPrecondition`), and traps otherwise — a programmer error, never
/// input from the bus. swift-nio's `NIOLoopBound` is the model.
///
/// An engine keeps its state in one of these, so the engine itself has only `let` properties
/// and is `Sendable` as the compiler checks it; what the compiler cannot check (which thread
/// touches the state) is checked here, on every access, instead of promised in a comment. Code
/// on the queue — D-Bus handlers, blocks sent with `queue.async`, tasks that prefer the
/// queue's executor — reads and writes ``value`` directly.
///
/// `@unchecked Sendable`: `storage` is touched only by ``value``'s accessors, and each first
/// checks that it runs on `queue`, a serial queue.
package final class QueueBound<Value>: @unchecked Sendable {
    /// The serial queue the value belongs to.
    package let queue: DispatchQueue
    // Through a pointer, not a stored `var`: no dynamic exclusivity check on each access (as in
    // `PosixMutex`), and `_modify` yields it in place.
    @usableFromInline let storage: UnsafeMutablePointer<Value>

    /// Binds `initialValue` to `queue`; may be called on any thread.
    package init(_ initialValue: consuming Value, queue: DispatchQueue) {
        self.queue = queue
        storage = .allocate(capacity: 1)
        storage.initialize(to: initialValue)
    }

    deinit {
        storage.deinitialize(count: 1)
        storage.deallocate()
    }

    /// The value; traps unless the caller runs on ``queue``.
    @inlinable
    package var value: Value {
        _read {
            dispatchPrecondition(condition: .onQueue(queue))
            yield storage.pointee
        }
        _modify {
            dispatchPrecondition(condition: .onQueue(queue))
            yield &storage.pointee
        }
    }
}
