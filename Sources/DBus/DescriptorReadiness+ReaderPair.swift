internal import CDBus
import Dispatch
import Foundation
import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Two threads that take turns waiting for one descriptor — a D-Bus connection's socket — and
/// run the handler inside `queue.sync`, then the work it handed them (``WorkAfterEvent``).
///
/// Why two: work handed to a reading thread (the central's delegate deliveries, inside the app's
/// queue's `sync`) may keep it away from the socket for as long as the app keeps its queue busy.
/// The other thread goes on reading meanwhile, so what bluetoothd sends is handled on the
/// connection's queue (replies, agent requests, the delegate backlog's bounds) as it would be
/// with one reading thread and no handed work. Both wait in `epoll_wait` on their own epoll
/// descriptor, with their own duplicate of the socket added with `EPOLLEXCLUSIVE`: the kernel
/// wakes one waiting thread per event, not both, so an event still costs one wake-up. A
/// delivery is handed to at most one thread at a time (the backlog has one drain on its way),
/// so at most one of the two waits on an app's queue.
///
/// Cancel and enable as ``DedicatedReadinessThread``'s poll: under the control lock, each
/// thread woken through its own socket pair; each thread closes its own descriptors on its way
/// out. The first failure of either thread's wait is reported once; a handler answering false
/// ends both.
final class DedicatedReaderPair: DedicatedWaiter {
    /// What ``cancel()``, ``setEnabled(_:)`` and the threads' exits share.
    private struct Control {
        /// The ends written to wake each thread; -1 once cancelled.
        var wakeWrites: [Int32] = []
    }

    private let control = PosixMutex(Control())
    private let enabled = Atomic<Bool>(false)
    private let cancelled = Atomic<Bool>(false)
    private let failureReported = Atomic<Bool>(false)

    /// Starts the threads on `fd` and a duplicate of it; nil (nothing started, `fd` untouched)
    /// when a duplicate, a socket pair or an epoll descriptor cannot be made — the caller then
    /// falls back to one thread. The threads close `fd` and the duplicate on their way out.
    init?(
        _ fd: Int32, queue: DispatchQueue, enabled: Bool, handler: @escaping @Sendable () -> Bool,
        onFailure: @escaping @Sendable (String) -> Void
    ) {
        struct Reader {
            let fd: Int32, epoll: Int32, wakeRead: Int32, wakeWrite: Int32
        }
        var readers: [Reader] = []
        func undo() {
            for (index, reader) in readers.enumerated() {
                if index > 0 { SystemCall.close(reader.fd) }
                for other in [reader.epoll, reader.wakeRead, reader.wakeWrite] { SystemCall.close(other) }
            }
        }
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        for index in 0..<2 {
            guard let own = index == 0 ? fd : try? SystemCall.duplicate(fd).get() else { break }
            guard let (wakeRead, wakeWrite) = try? SystemCall.socketPair(AF_UNIX, flags).get() else {
                if index > 0 { SystemCall.close(own) }
                break
            }
            guard let epoll = try? SystemCall.epollCreate().get(),
                (try? SystemCall.epollAdd(epoll, wakeRead, exclusive: false).get()) != nil
            else {
                if index > 0 { SystemCall.close(own) }
                SystemCall.close(wakeRead)
                SystemCall.close(wakeWrite)
                break
            }
            readers.append(Reader(fd: own, epoll: epoll, wakeRead: wakeRead, wakeWrite: wakeWrite))
        }
        guard readers.count == 2 else {
            undo()
            return nil
        }
        control.withLock { $0.wakeWrites = readers.map(\.wakeWrite) }
        self.enabled.store(enabled, ordering: .releasing)
        for reader in readers {
            Thread.detachNewThread { [self] in
                SystemCall.nameCurrentThread(WorkAfterEvent.readingThreadName)
                let list = WorkAfterEvent.List.install()
                let failure = wait(
                    reader.fd, epoll: reader.epoll, wake: reader.wakeRead, queue: queue, list: list,
                    handler: handler)
                if list != nil { WorkAfterEvent.List.uninstall() }
                if let failure, !cancelled.load(ordering: .acquiring),
                    !failureReported.exchange(true, ordering: .acquiringAndReleasing)
                {
                    onFailure(failure)
                }
                SystemCall.close(reader.fd)
                SystemCall.close(reader.epoll)
                SystemCall.close(reader.wakeRead)
            }
        }
    }

    /// One thread's loop: waits until cancelled or ended by the handler (nil), or until the wait
    /// fails (the reason).
    private func wait(
        _ fd: Int32, epoll: Int32, wake: Int32, queue: DispatchQueue, list: WorkAfterEvent.List?,
        handler: @escaping @Sendable () -> Bool
    ) -> String? {
        let keepGoing = Atomic<Bool>(true)
        // One work item for every `sync` of this thread (see DedicatedReadinessThread.visit).
        let handle = DispatchWorkItem { [self] in
            keepGoing.store(!cancelled.load(ordering: .acquiring) && handler(), ordering: .relaxed)
        }
        let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: 2)
        defer { events.deallocate() }
        var watching = false
        while true {
            if cancelled.load(ordering: .acquiring) { return nil }
            let wanted = enabled.load(ordering: .acquiring)
            if wanted != watching {
                var changed =
                    wanted
                    ? SystemCall.epollAdd(epoll, fd, exclusive: true) : SystemCall.epollRemove(epoll, fd)
                if wanted, case .failure(let error) = changed, error == Errno(EINVAL) {
                    // A kernel before 4.5 has no EPOLLEXCLUSIVE: both threads wake per event.
                    changed = SystemCall.epollAdd(epoll, fd, exclusive: false)
                }
                if case .failure(let error) = changed { return "watching the descriptor failed: \(error)" }
                watching = wanted
            }
            let count: Int
            switch SystemCall.epollWait(epoll, events) {
            case .success(let ready): count = ready
            case .failure(let error): return "waiting for the descriptor failed: \(error)"
            }
            var readable = false
            for index in 0..<count {
                if events[index].data.fd == wake {
                    var bytes: (UInt64, UInt64) = (0, 0)
                    _ = withUnsafeMutableBytes(of: &bytes) {
                        SystemCall.receive(wake, into: $0, flags: Int32(MSG_DONTWAIT))
                    }
                } else {
                    readable = true
                }
            }
            // A change of `enabled` or a cancel is seen at the top before the handler runs.
            guard readable, !cancelled.load(ordering: .acquiring), enabled.load(ordering: .acquiring) else {
                continue
            }
            if let list { list.run { queue.sync(execute: handle) } } else { queue.sync(execute: handle) }
            if !keepGoing.load(ordering: .relaxed) {
                cancel()  // the other thread ends too
                return nil
            }
        }
    }

    /// Whether the threads watch the descriptor. Never blocks.
    func setEnabled(_ enabled: Bool) {
        control.withLock { control in
            guard self.enabled.load(ordering: .relaxed) != enabled, !cancelled.load(ordering: .relaxed) else { return }
            self.enabled.store(enabled, ordering: .releasing)
            for wakeWrite in control.wakeWrites { SystemCall.wake(wakeWrite) }
        }
    }

    /// Ends both threads (each closes its descriptor on its way out). Idempotent; never blocks.
    func cancel() {
        control.withLock { control in
            guard !cancelled.load(ordering: .relaxed) else { return }
            cancelled.store(true, ordering: .releasing)
            for wakeWrite in control.wakeWrites {
                SystemCall.wake(wakeWrite)
                SystemCall.close(wakeWrite)
            }
            control.wakeWrites = []
        }
    }
}
