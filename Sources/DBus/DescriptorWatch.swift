package import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Calls a handler on a serial queue when a descriptor is readable or writable: our replacement
/// for libdispatch's read and write sources.
///
/// libdispatch's epoll back end keeps one registration per descriptor number for all of its
/// sources and is known to lose track of it when sources on one socket come and go (a read
/// source and one-shot write sources, a peer hanging up): swift-corelibs-libdispatch issues 833
/// and 949. Seen here: a heart-rate peripheral crashed in `_dispatch_event_loop_drain` reading a
/// freed registration (CI, 2026-12-02); a stress of our pattern (4 serial queues × 50,000
/// sockets, each with a read source and one-shot write sources, the peer closing) lost a hang-up
/// in 2 runs of 6 and crashed in `_dispatch_unote_unregister_muxed` in a third. The same stress
/// on these watches is `DescriptorWatchTests.everyHangUpIsReportedUnderChurn`. A watch here keeps no registration in
/// the kernel: one thread of ours (``DescriptorWatcher``) polls the descriptors of the armed
/// watches, rebuilding its `poll` set from its own table each time, so a cancelled watch is
/// never reported and a reused descriptor number never confuses two watches.
///
/// Level-triggered and disarmed while a handler is on its way: a repeating watch is armed again
/// after its handler returns (if still enabled); a one-shot watch cancels itself before its
/// handler runs. ``cancel()`` may be called from any thread; `cancelled` then runs on the queue
/// after any handler already on its way there, and no handler after it — the place to close the
/// descriptor (the queue must be serial). A watch stays alive, and watching, until cancelled.
package final class DescriptorWatch: Sendable {
    /// What to wait for.
    package enum Condition: Sendable {
        /// Data to read, or the end of the stream, or an error.
        case readable
        /// Room to write, or an error.
        case writable

        var pollEvents: Int16 { self == .readable ? Int16(POLLIN) : Int16(POLLOUT) }
    }

    let id: UInt64
    let fd: Int32
    let events: Int16
    private let repeats: Bool
    private let queue: DispatchQueue
    private let handler: @Sendable () -> Void
    private let cancelled: @Sendable () -> Void
    private let cancelledFlag = Atomic<Bool>(false)
    private let watcher: DescriptorWatcher

    private init(
        fd: Int32, condition: Condition, repeats: Bool, queue: DispatchQueue, handler: @escaping @Sendable () -> Void,
        cancelled: @escaping @Sendable () -> Void
    ) {
        watcher = DescriptorWatcher.shared
        id = watcher.nextID()
        self.fd = fd
        events = condition.pollEvents
        self.repeats = repeats
        self.queue = queue
        self.handler = handler
        self.cancelled = cancelled
    }

    /// Calls `handler` on `queue` each time `fd` is ready, until ``cancel()``; watching starts at
    /// once if `enabled` (else at ``setEnabled(_:)``).
    package static func repeating(
        _ fd: Int32, _ condition: Condition, queue: DispatchQueue, enabled: Bool = true,
        handler: @escaping @Sendable () -> Void, cancelled: @escaping @Sendable () -> Void = {}
    ) -> DescriptorWatch {
        let watch = DescriptorWatch(
            fd: fd, condition: condition, repeats: true, queue: queue, handler: handler, cancelled: cancelled)
        watch.watcher.add(watch, armed: enabled)
        return watch
    }

    /// Calls `fired` once on `queue` when `fd` is first ready: the watch cancels itself first
    /// (`cancelled` runs after `fired`). A watch cancelled before never calls `fired`.
    package static func oneShot(
        _ fd: Int32, _ condition: Condition, queue: DispatchQueue, fired: @escaping @Sendable () -> Void,
        cancelled: @escaping @Sendable () -> Void = {}
    ) -> DescriptorWatch {
        let watch = DescriptorWatch(
            fd: fd, condition: condition, repeats: false, queue: queue, handler: fired, cancelled: cancelled)
        watch.watcher.add(watch, armed: true)
        return watch
    }

    /// Whether ``cancel()`` was called.
    package var isCancelled: Bool { cancelledFlag.load(ordering: .acquiring) }

    /// Stops watching; `cancelled` runs once on the queue, after any handler already on its way
    /// there (called on the queue, after which no handler runs). Idempotent; any thread.
    package func cancel() { _ = markCancelled() }

    /// Cancels; true the first time.
    private func markCancelled() -> Bool {
        guard !cancelledFlag.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        watcher.remove(self)
        queue.async(execute: cancelled)
        return true
    }

    /// Pauses or resumes a repeating watch (libdbus toggles its write watch). Any thread.
    package func setEnabled(_ enabled: Bool) {
        guard !isCancelled else { return }
        watcher.setEnabled(self, enabled)
    }

    /// Called by the watcher's thread, the watch disarmed: runs the handler on the queue.
    func deliver() {
        queue.async { [self] in
            if repeats {
                guard !isCancelled else { return }
                handler()
                if !isCancelled { watcher.handled(self) }
            } else if markCancelled() {
                handler()
            }
        }
    }
}
