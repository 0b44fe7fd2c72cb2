import Dispatch
import Foundation
import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The thread that waits for a connection's socket to become readable and handles it inside
/// `queue.sync` — in place of a dispatch read source.
///
/// A dispatch source wakes libdispatch's event thread, which then wakes a worker for the queue:
/// two thread wake-ups per incoming message, and the message is decoded on whichever worker
/// libdispatch picks. With glibc that spreads a long stream of messages (a scan with duplicates)
/// over many malloc arenas, which keep the memory each held; `queue.sync` from one thread of
/// our own runs the handler on that thread (libdispatch runs a sync block on the caller), so a
/// message costs one wake-up and its allocations stay in one arena. Everything else that runs
/// on `queue` still does, and handlers keep the queue's exclusivity.
///
/// libdbus enables and disables the watch, and removes it, from inside its own calls (holding
/// its lock): ``setEnabled(_:)`` and ``cancel()`` only record that and wake the thread through a
/// socket pair, never waiting. The thread polls a duplicate of the socket that it closes itself
/// when it ends, so a descriptor number the process reuses is never polled.
///
/// If polling fails (an error other than an interruption, which ``SystemCall`` retries, or the
/// descriptor is no longer valid), the thread ends and reports it through `onFailure` (off the
/// queue): the connection can no longer read, so it must be torn down (or connected again),
/// never left deaf.
final class DBusReadWatchThread: Sendable {
    private final class Shared: Sendable {
        /// The end written to wake the thread; -1 once cancelled (closed under the lock, which
        /// also orders the changes of `enabled` and `cancelled` with the wake-ups).
        let wakeWrite = PosixMutex<Int32>(-1)
        /// Read without the lock by the thread, twice per incoming message (before polling and
        /// inside `queue.sync`): written only under `wakeWrite`'s lock.
        let enabled = Atomic<Bool>(false)
        let cancelled = Atomic<Bool>(false)
    }

    private let shared = Shared()

    /// Starts the thread for `descriptor` (closed when the thread ends if `closesDescriptor`);
    /// while enabled, each time it is readable `onReadable` runs inside `queue.sync`. A polling
    /// failure before ``cancel()`` ends the thread and calls `onFailure` with the reason, once.
    init(
        descriptor: Int32, closesDescriptor: Bool = true, queue: DispatchQueue,
        onReadable: @escaping @Sendable () -> Void, onFailure: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        // A socket pair, not a pipe: waking a thread that already ended must not raise SIGPIPE.
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let (wake, wakeWrite) = (try? SystemCall.socketPair(AF_UNIX, flags).get()) ?? (-1, -1)
        shared.wakeWrite.withLock { $0 = wakeWrite }
        let shared = self.shared
        Thread.detachNewThread {
            if let failure = Self.run(descriptor, wake: wake, shared: shared, queue: queue, onReadable: onReadable),
                !shared.cancelled.load(ordering: .acquiring)
            {
                onFailure(failure)
            }
            if closesDescriptor { SystemCall.close(descriptor) }
            if wake >= 0 { SystemCall.close(wake) }
        }
    }

    /// Polls until cancelled (nil) or until polling fails (the reason).
    private static func run(
        _ fd: Int32, wake: Int32, shared: Shared, queue: DispatchQueue, onReadable: @escaping @Sendable () -> Void
    ) -> String? {
        // Without a socket pair (descriptor limit) poll ignores the negative descriptor, and a
        // timeout lets changes be seen.
        let timeout: Int32 = wake >= 0 ? -1 : 5
        var watched = [
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
        ]
        // One work item for the thread's life, run by every `queue.sync`: a closure passed to
        // `sync` becomes a new heap block each time (two allocations per incoming message);
        // libdispatch runs a block made by `dispatch_block_create` as often as it is submitted.
        let handle = DispatchWorkItem { if !shared.cancelled.load(ordering: .acquiring) { onReadable() } }
        while true {
            if shared.cancelled.load(ordering: .acquiring) { return nil }
            let enabled = shared.enabled.load(ordering: .acquiring)
            watched[0].revents = 0
            watched[1].revents = 0
            let polled = SystemCall.poll(&watched, count: enabled ? 2 : 1, timeout: timeout)
            if case .failure(let error) = polled { return "polling the bus socket failed: \(error)" }
            if enabled && watched[1].revents & Int16(POLLNVAL) != 0 {
                return "the bus socket's descriptor is no longer valid"
            }
            if watched[0].revents != 0 {
                var bytes: (UInt64, UInt64) = (0, 0)
                _ = withUnsafeMutableBytes(of: &bytes) {
                    SystemCall.receive(wake, into: $0, flags: Int32(MSG_DONTWAIT))
                }
                continue
            }
            if enabled && watched[1].revents != 0 {
                queue.sync(execute: handle)
            }
        }
    }

    /// Whether the socket is watched (libdbus toggles it: it stops reading while its incoming
    /// queue is full). Never blocks.
    func setEnabled(_ enabled: Bool) {
        let shared = self.shared
        shared.wakeWrite.withLock { wakeWrite in
            guard shared.enabled.load(ordering: .relaxed) != enabled, !shared.cancelled.load(ordering: .relaxed) else {
                return
            }
            shared.enabled.store(enabled, ordering: .releasing)
            SystemCall.wake(wakeWrite)
        }
    }

    /// Ends the thread; it closes the descriptor on its way out. Idempotent; never blocks.
    func cancel() {
        let shared = self.shared
        shared.wakeWrite.withLock { wakeWrite in
            guard !shared.cancelled.load(ordering: .relaxed) else { return }
            shared.cancelled.store(true, ordering: .releasing)
            SystemCall.wake(wakeWrite)
            if wakeWrite >= 0 { SystemCall.close(wakeWrite) }
            wakeWrite = -1
        }
    }

    deinit { cancel() }
}
