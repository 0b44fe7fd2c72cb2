package import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Calls a handler on a serial queue when a descriptor is ready: the process's one readiness
/// service, with the delivery policy each path needs (``Delivery``). It replaces libdispatch's
/// read and write sources.
///
/// - ``Delivery/shared``: one thread for the process (``DescriptorWatcher``) polls the
///   descriptors of every armed registration and sends each ready one's handler to its queue
///   with `queue.async`; the registration is disarmed while its handler is on its way. For the
///   write, link, L2CAP and simulator sockets: many descriptors, few events each.
/// - ``Delivery/dedicated(_:)``: a thread of the registration's own waits for the descriptor and
///   runs the handler inside `queue.sync`: on an idle serial queue libdispatch runs that block on
///   the waiting thread itself, so an event costs one thread wake-up, not two (a wake-up of a
///   shared thread, then a worker for the queue), and its allocations stay in that thread's
///   malloc arena. For the hot paths: the bus connection's socket (``Wait/poll``, switched on
///   and off by libdbus) and AcquireNotify's socket (``Wait/receive``, one `recvmmsg` that waits
///   and reads). A busy queue then holds up only its own descriptor's thread. The bus
///   connection's socket has two such threads that take turns (``DedicatedReaderPair``), so
///   that work handed to one (``WorkAfterEvent``) never stops the reading.
///
/// Why no libdispatch source: its epoll back end keeps one registration per descriptor number
/// for all of its sources and is known to lose track of it when sources on one socket come and
/// go (swift-corelibs-libdispatch issues 833 and 949). Seen here: a heart-rate peripheral
/// crashed in `_dispatch_event_loop_drain` reading a freed registration (CI, 2026-12-02); a
/// stress of our pattern (4 serial queues × 50,000 sockets, each with a read source and
/// one-shot write sources, the peer closing) lost a hang-up in 2 runs of 6 and crashed in
/// `_dispatch_unote_unregister_muxed` in a third. The same stress on these registrations is
/// `DescriptorWatchTests.everyHangUpIsReportedUnderChurn`. No policy keeps a registration in the
/// kernel: the shared thread rebuilds its `poll` set from its own table each time, and a
/// dedicated thread polls or reads a descriptor it closes itself, so a cancelled registration is
/// never reported and a reused descriptor number never confuses two of them.
///
/// Shared, level-triggered and disarmed while a handler is on its way: a repeating registration
/// is armed again after its handler returns (if still enabled); a one-shot one cancels itself
/// before its handler runs. ``cancel()`` may be called from any thread; `cancelled` then runs on
/// the queue after any handler already on its way there, and no handler after it — the place to
/// close the descriptor (the queue must be serial). A shared registration stays alive, and
/// watching, until cancelled; a dedicated one is cancelled when released.
package final class DescriptorReadiness: Sendable {
    /// What to wait for.
    package enum Condition: Sendable {
        /// Data to read, or the end of the stream, or an error.
        case readable
        /// Room to write, or an error.
        case writable

        var pollEvents: Int16 { self == .readable ? Int16(POLLIN) : Int16(POLLOUT) }
    }

    /// How a dedicated thread waits for its descriptor.
    package enum Wait: Sendable {
        /// `poll` on the descriptor and a wake-up socket pair, while enabled (libdbus's read
        /// watch); ``cancel()`` wakes it through the pair.
        case poll
        /// A blocking read of the registration's own, run on the thread: it returns true when it
        /// has something for the handler (data, or an end to report), false to wait again.
        /// ``cancel()`` wakes it with `shutdown(2)` of the descriptor, under the lock the thread
        /// takes to close it.
        case receive(@Sendable (_ fd: Int32) -> Bool)
    }

    /// Which thread waits, and how the handler reaches its queue.
    package enum Delivery: Sendable {
        /// The process's polling thread; handlers sent with `queue.async`.
        case shared
        /// A thread of the registration's own; handlers run inside `queue.sync`.
        case dedicated(Wait)
    }

    /// The policy this registration was made with.
    package let delivery: Delivery
    let id: UInt64
    let fd: Int32
    let events: Int16
    private let repeats: Bool
    private let queue: DispatchQueue
    private let handler: @Sendable () -> Void
    private let cancelled: @Sendable () -> Void
    private let cancelledFlag = Atomic<Bool>(false)
    /// The shared thread (``Delivery/shared``), or nil.
    private let watcher: DescriptorWatcher?
    /// The registration's own thread or threads (``Delivery/dedicated(_:)``), or nil.
    private let thread: (any DedicatedWaiter)?
    /// The descriptor a shared registration keeps open until its `cancelled` has run, if any.
    private let keeps: SharedDescriptor?

    private init(
        fd: Int32, keeps: SharedDescriptor?, condition: Condition, repeats: Bool, queue: DispatchQueue,
        handler: @escaping @Sendable () -> Void, cancelled: @escaping @Sendable () -> Void
    ) {
        delivery = .shared
        self.keeps = keeps
        let watcher = DescriptorWatcher.shared
        self.watcher = watcher
        thread = nil
        id = watcher.nextID()
        self.fd = fd
        events = condition.pollEvents
        self.repeats = repeats
        self.queue = queue
        self.handler = handler
        self.cancelled = cancelled
    }

    private init(_ fd: Int32, wait: Wait, queue: DispatchQueue, thread: any DedicatedWaiter) {
        delivery = .dedicated(wait)
        keeps = nil
        watcher = nil
        self.thread = thread
        id = 0
        self.fd = fd
        events = Int16(POLLIN)
        repeats = true
        self.queue = queue
        handler = {}
        cancelled = {}
    }

    /// Shared: calls `handler` on `queue` each time `fd` is ready, until ``cancel()``; watching
    /// starts at once if `enabled` (else at ``setEnabled(_:)``).
    package static func repeating(
        _ fd: Int32, _ condition: Condition, queue: DispatchQueue, enabled: Bool = true,
        handler: @escaping @Sendable () -> Void, cancelled: @escaping @Sendable () -> Void = {}
    ) -> DescriptorReadiness {
        shared(fd, nil, condition, repeats: true, queue: queue, enabled: enabled, handler, cancelled)
    }

    /// Shared, as ``repeating(_:_:queue:enabled:handler:cancelled:)``, keeping `descriptor` open
    /// until `cancelled` has run.
    package static func repeating(
        _ descriptor: SharedDescriptor, _ condition: Condition, queue: DispatchQueue, enabled: Bool = true,
        handler: @escaping @Sendable () -> Void, cancelled: @escaping @Sendable () -> Void = {}
    ) -> DescriptorReadiness {
        shared(descriptor.fd, descriptor, condition, repeats: true, queue: queue, enabled: enabled, handler, cancelled)
    }

    /// Shared: calls `fired` once on `queue` when `fd` is first ready: the registration cancels
    /// itself first (`cancelled` runs after `fired`). One cancelled before never calls `fired`.
    package static func oneShot(
        _ fd: Int32, _ condition: Condition, queue: DispatchQueue, fired: @escaping @Sendable () -> Void,
        cancelled: @escaping @Sendable () -> Void = {}
    ) -> DescriptorReadiness {
        shared(fd, nil, condition, repeats: false, queue: queue, enabled: true, fired, cancelled)
    }

    /// Shared, as ``oneShot(_:_:queue:fired:cancelled:)``, keeping `descriptor` open until
    /// `cancelled` has run.
    package static func oneShot(
        _ descriptor: SharedDescriptor, _ condition: Condition, queue: DispatchQueue,
        fired: @escaping @Sendable () -> Void, cancelled: @escaping @Sendable () -> Void = {}
    ) -> DescriptorReadiness {
        shared(descriptor.fd, descriptor, condition, repeats: false, queue: queue, enabled: true, fired, cancelled)
    }

    private static func shared(
        _ fd: Int32, _ keeps: SharedDescriptor?, _ condition: Condition, repeats: Bool, queue: DispatchQueue,
        enabled: Bool, _ handler: @escaping @Sendable () -> Void, _ cancelled: @escaping @Sendable () -> Void
    ) -> DescriptorReadiness {
        let registration = DescriptorReadiness(
            fd: fd, keeps: keeps, condition: condition, repeats: repeats, queue: queue, handler: handler,
            cancelled: cancelled)
        registration.watcher?.add(registration, armed: enabled)
        return registration
    }

    /// Dedicated: starts a thread that waits for `fd` to be readable as `wait` says and, each time
    /// (while enabled), runs `handler` inside `queue.sync`, until ``cancel()`` or until `handler`
    /// returns false. The thread closes `fd` on its way out if `closesDescriptor`.
    ///
    /// A failure of the wait itself (``Wait/poll``: `poll` failing, or the descriptor no longer
    /// valid) before ``cancel()`` ends the thread and is reported once through `onFailure`, on
    /// that thread (off the queue). ``Wait/receive`` reports its ends through `handler`.
    ///
    /// With `runsWorkAfterEvent` (``Wait/poll`` and `closesDescriptor` only) two threads take
    /// turns (``DedicatedReaderPair``), and the handler may hand work to the one running it
    /// (``WorkAfterEvent/enqueue(_:)``), which runs it after its `queue.sync`, outside the queue;
    /// if the pair cannot be made, one thread as without it (and no work is taken).
    package static func dedicated(
        _ fd: Int32, _ wait: Wait, closesDescriptor: Bool, queue: DispatchQueue, enabled: Bool = true,
        runsWorkAfterEvent: Bool = false, handler: @escaping @Sendable () -> Bool,
        onFailure: @escaping @Sendable (String) -> Void = { _ in }
    ) -> DescriptorReadiness {
        if runsWorkAfterEvent, closesDescriptor, case .poll = wait,
            let pair = DedicatedReaderPair(
                fd, queue: queue, enabled: enabled, handler: handler, onFailure: onFailure)
        {
            return DescriptorReadiness(fd, wait: wait, queue: queue, thread: pair)
        }
        if runsWorkAfterEvent {
            DBusLog.warning("cannot start a second reading thread (descriptors exhausted?): reading with one")
        }
        let thread = DedicatedReadinessThread(
            fd, wait, closesDescriptor: closesDescriptor, queue: queue, enabled: enabled, handler: handler,
            onFailure: onFailure)
        return DescriptorReadiness(fd, wait: wait, queue: queue, thread: thread)
    }

    /// Whether ``cancel()`` was called.
    package var isCancelled: Bool { cancelledFlag.load(ordering: .acquiring) }

    /// Stops watching. Shared: `cancelled` runs once on the queue, after any handler already on
    /// its way there (called on the queue, after which no handler runs). Dedicated: wakes the
    /// thread, which runs no handler after that and closes the descriptor if it owns it; never
    /// waits for it. Idempotent; any thread.
    package func cancel() { _ = markCancelled() }

    /// Cancels; true the first time.
    private func markCancelled() -> Bool {
        guard !cancelledFlag.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        if let thread {
            thread.cancel()
        } else {
            watcher?.remove(self)
            if let keeps {
                queue.async { [cancelled] in
                    cancelled()
                    withExtendedLifetime(keeps) {}
                }
            } else {
                queue.async(execute: cancelled)
            }
        }
        return true
    }

    /// Pauses or resumes a repeating registration (libdbus toggles its watches). Never blocks;
    /// any thread.
    package func setEnabled(_ enabled: Bool) {
        guard !isCancelled else { return }
        if let thread {
            thread.setEnabled(enabled)
        } else {
            watcher?.setEnabled(self, enabled)
        }
    }

    /// Called by the shared thread, the registration disarmed: runs the handler on the queue.
    func deliver() {
        queue.async { [self] in
            if repeats {
                guard !isCancelled else { return }
                handler()
                if !isCancelled { watcher?.handled(self) }
            } else if markCancelled() {
                handler()
            }
        }
    }

    deinit {
        // A shared registration is held by the shared thread's table until cancelled.
        if thread != nil { cancel() }
    }
}
