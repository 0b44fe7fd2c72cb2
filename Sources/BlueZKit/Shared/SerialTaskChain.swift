import Locking

/// Runs asynchronous operations one after another, in the order they were enqueued: each starts
/// when the one before it has finished. Both managers order their bluetoothd commands with it
/// (a discovery stop must never overtake the start it follows; service changes apply in order).
///
/// Each operation runs in a task of its own; enqueueing never blocks. `Sendable`: the last task
/// is behind a lock.
final class SerialTaskChain: Sendable {
    private let last = PosixMutex<Task<Void, Never>?>(nil)
    private let executor: (any TaskExecutor)?

    /// A chain whose operations run on `executor` (nil: the global executor).
    init(executor: (any TaskExecutor)? = nil) { self.executor = executor }

    /// Runs `operation` after every operation enqueued before it; returns the task that runs it
    /// (awaiting it waits for `operation` and everything before it).
    @discardableResult
    func enqueue(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        last.withLock { last in
            let previous = last
            let task = Task(executorPreference: executor) {
                await previous?.value
                await operation()
            }
            last = task
            return task
        }
    }
}
