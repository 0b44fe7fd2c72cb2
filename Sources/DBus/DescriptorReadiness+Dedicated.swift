import Dispatch
import Foundation
import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What a ``DescriptorReadiness/Delivery/dedicated(_:)`` registration's threads answer to.
protocol DedicatedWaiter: Sendable {
    /// Whether the descriptor is watched. Never blocks.
    func setEnabled(_ enabled: Bool)
    /// Ends the thread or threads. Idempotent; never blocks.
    func cancel()
}

/// The thread of one ``DescriptorReadiness/Delivery/dedicated(_:)`` registration: it waits for
/// its descriptor and runs the handler inside `queue.sync` (see ``DescriptorReadiness`` for why).
///
/// One cancel and close protocol for both waits: ``cancel()`` sets `cancelled` under the
/// control lock and wakes the thread — through a socket pair for ``DescriptorReadiness/Wait/poll``,
/// with `shutdown(2)` of the descriptor for ``DescriptorReadiness/Wait/receive`` (a blocking
/// read has nothing else to wake it) — and the thread closes the descriptor under that same lock
/// on its way out, so a wake-up never reaches a number the process has reused. Neither
/// ``cancel()`` nor ``setEnabled(_:)`` waits: libdbus calls them holding its own lock.
final class DedicatedReadinessThread: DedicatedWaiter {
    /// What ``cancel()`` and the thread's exit share.
    private struct Control {
        /// The end written to wake a polling thread; -1 once cancelled or for a receiving one.
        var wakeWrite: Int32 = -1
        /// The descriptor while the thread has it open; -1 after the thread is done with it.
        var fd: Int32 = -1
    }

    private let control = PosixMutex(Control())
    /// Read without the lock by the thread, twice per event (before polling and inside
    /// `queue.sync`): written only under `control`'s lock.
    private let enabled = Atomic<Bool>(false)
    private let cancelled = Atomic<Bool>(false)
    /// Whether ``cancel()`` wakes the thread by shutting the descriptor down.
    private let shutsDown: Bool

    init(
        _ fd: Int32, _ wait: DescriptorReadiness.Wait, closesDescriptor: Bool, queue: DispatchQueue, enabled: Bool,
        handler: @escaping @Sendable () -> Bool, onFailure: @escaping @Sendable (String) -> Void
    ) {
        var wake: Int32 = -1
        var wakeWrite: Int32 = -1
        if case .poll = wait {
            // A socket pair, not a pipe: waking a thread that already ended must not raise SIGPIPE.
            let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
            (wake, wakeWrite) = (try? SystemCall.socketPair(AF_UNIX, flags).get()) ?? (-1, -1)
            shutsDown = false
        } else {
            shutsDown = true
        }
        control.withLock { $0 = Control(wakeWrite: wakeWrite, fd: fd) }
        self.enabled.store(enabled, ordering: .releasing)
        let wakeRead = wake
        Thread.detachNewThread { [self] in
            let failure: String?
            switch wait {
            case .poll: failure = poll(fd, wake: wakeRead, queue: queue, handler: handler)
            case .receive(let receive): failure = self.receive(fd, receive, queue: queue, handler: handler)
            }
            if let failure, !cancelled.load(ordering: .acquiring) { onFailure(failure) }
            control.withLock { control in
                if closesDescriptor && control.fd >= 0 { SystemCall.close(control.fd) }
                control.fd = -1
            }
            if wakeRead >= 0 { SystemCall.close(wakeRead) }
        }
    }

    /// The work item every `queue.sync` of the thread runs: a closure passed to `sync` becomes a
    /// new heap block each time (two allocations per event); libdispatch runs a block made by
    /// `dispatch_block_create` as often as it is submitted. `answer` carries the handler's
    /// answer out (relaxed: `queue.sync` orders the accesses).
    private func visit(_ handler: @escaping @Sendable () -> Bool, answer: Answer) -> DispatchWorkItem {
        DispatchWorkItem { [self] in
            answer.keepGoing.store(!cancelled.load(ordering: .acquiring) && handler(), ordering: .relaxed)
        }
    }

    /// The handler's last answer: whether the thread goes on.
    private final class Answer: Sendable {
        let keepGoing = Atomic<Bool>(true)
    }

    /// ``DescriptorReadiness/Wait/poll``: polls until cancelled or ended by the handler (nil), or
    /// until polling fails (the reason).
    private func poll(
        _ fd: Int32, wake: Int32, queue: DispatchQueue, handler: @escaping @Sendable () -> Bool
    ) -> String? {
        // Without a socket pair (descriptor limit) poll ignores the negative descriptor, and a
        // timeout lets changes be seen.
        let timeout: Int32 = wake >= 0 ? -1 : 5
        var watched = [
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
        ]
        let answer = Answer()
        let handle = visit(handler, answer: answer)
        while true {
            if cancelled.load(ordering: .acquiring) { return nil }
            let enabled = enabled.load(ordering: .acquiring)
            watched[0].revents = 0
            watched[1].revents = 0
            let polled = SystemCall.poll(&watched, count: enabled ? 2 : 1, timeout: timeout)
            if case .failure(let error) = polled { return "polling the descriptor failed: \(error)" }
            if enabled && watched[1].revents & Int16(POLLNVAL) != 0 {
                return "the descriptor is no longer valid"
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
                if !answer.keepGoing.load(ordering: .relaxed) { return nil }
            }
        }
    }

    /// ``DescriptorReadiness/Wait/receive``: one blocking read of the owner's per wake-up, then
    /// one `queue.sync`, until cancelled or ended by the handler. Never fails on its own.
    private func receive(
        _ fd: Int32, _ receive: @Sendable (Int32) -> Bool, queue: DispatchQueue,
        handler: @escaping @Sendable () -> Bool
    ) -> String? {
        let answer = Answer()
        let handle = visit(handler, answer: answer)
        while !cancelled.load(ordering: .acquiring) {
            let ready = receive(fd)
            if cancelled.load(ordering: .acquiring) { return nil }  // cancel(): its shutdown woke us
            guard ready else { continue }
            queue.sync(execute: handle)
            if !answer.keepGoing.load(ordering: .relaxed) { return nil }
        }
        return nil
    }

    /// Whether a polling thread watches its descriptor. Never blocks.
    func setEnabled(_ enabled: Bool) {
        control.withLock { control in
            guard self.enabled.load(ordering: .relaxed) != enabled, !cancelled.load(ordering: .relaxed) else { return }
            self.enabled.store(enabled, ordering: .releasing)
            SystemCall.wake(control.wakeWrite)
        }
    }

    /// Ends the thread (it closes the descriptor on its way out if it owns it). Idempotent;
    /// never blocks.
    func cancel() {
        control.withLock { control in
            guard !cancelled.load(ordering: .relaxed) else { return }
            cancelled.store(true, ordering: .releasing)
            if shutsDown {
                if control.fd >= 0 { SystemCall.shutdown(control.fd, Int32(SHUT_RDWR)) }
            } else {
                SystemCall.wake(control.wakeWrite)
                if control.wakeWrite >= 0 { SystemCall.close(control.wakeWrite) }
                control.wakeWrite = -1
            }
        }
    }
}
