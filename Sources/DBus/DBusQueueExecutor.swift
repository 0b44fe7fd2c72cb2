package import Dispatch

/// A connection's serial queue as a Swift concurrency executor: a task that prefers it
/// (`Task(executorPreference:)`) runs every stretch of its code between suspension points as a
/// block on the queue, like any other work of the connection.
///
/// This is how async code joins the queue-confined model without hopping: state that only the
/// queue touches can be read and written right after an `await`, with no `queue.async` back to
/// it (swift-nio bridges its event loops to Swift concurrency the same way). Also a
/// `SerialExecutor`, so that an actor could run on the queue.
package final class DBusQueueExecutor: TaskExecutor, SerialExecutor, @unchecked Sendable {
    /// The queue every job runs on.
    package let queue: DispatchQueue

    package init(queue: DispatchQueue) { self.queue = queue }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async {
            job.runSynchronously(isolatedTo: self.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
        }
    }

    package func checkIsolated() { dispatchPrecondition(condition: .onQueue(queue)) }
}
