package import DBus
package import Dispatch
import Foundation
import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The socket `GattCharacteristic1.AcquireNotify` hands out: each notification is one datagram.
///
/// bluetoothd (src/gatt-client.c, `notify_io_cb`) writes every notification of the characteristic
/// as one `SOCK_SEQPACKET` datagram, with no bus message at all, and ends the session when
/// either side closes its end: closing ours is how the subscription is released. A link that
/// goes down, a device removed from its cache or bluetoothd exiting close its end, which this
/// reports once through `onClose`.
///
/// A thread of its own waits in a blocking `recv` and hands each datagram to `onValue` inside
/// `queue.sync`: on an idle serial queue libdispatch runs that block on the waiting thread
/// itself, so a notification costs one thread wake-up, not the two of a dispatch source (its
/// manager thread, then a worker for the queue) — what a small board's CPU pays most for
/// (`Scripts/benchmark --only fd_notify` measures this path) — and one system call: a
/// `recvmmsg` that waits for a datagram and takes those that came with it, all delivered in the
/// same `queue.sync` (``BlueZDatagramBatch``; where `recvmmsg` is missing, a `recv` that waits
/// and one that finds the socket drained).
/// The values still run on `queue`, after anything queued there before. ``close()`` wakes the
/// thread with `shutdown(2)`, under a lock that the thread also takes to close the descriptor,
/// so it never reaches a number the process has reused.
/// `@unchecked Sendable`: its stored properties are constants (atomic flags, a locked descriptor).
package final class BlueZNotifySocket: @unchecked Sendable {
    /// The ATT MTU bluetoothd reported with the socket.
    package let mtu: Int
    /// The most datagrams delivered in one visit to the queue: a peer that keeps sending must
    /// not keep the queue (the connection's, serving every other bus message) for ever.
    static let maximumBurst = 64
    private let ended = EndFlag()

    /// Takes over `descriptor` and starts reading; values and the end are handed over on `queue`.
    ///
    /// - Parameters:
    ///   - onValue: called on `queue` for each datagram, with bytes valid only during the call.
    ///   - onClose: called once on `queue` when bluetoothd closed its end or reading failed;
    ///     not called after ``close()``.
    package init(
        descriptor: UnixFileDescriptor, mtu: UInt16, queue: DispatchQueue,
        onValue: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, onClose: @escaping @Sendable () -> Void
    ) {
        self.mtu = Int(mtu)
        let fd = descriptor.take()
        // bluetoothd makes the pair non-blocking; our end waits in recv.
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        let ended = self.ended
        ended.descriptor.withLock { $0 = fd }
        Thread.detachNewThread {
            Self.read(fd, queue: queue, ended: ended, onValue: onValue, onClose: onClose)
            ended.descriptor.withLock { descriptor in
                if descriptor >= 0 { _ = Glibc.close(descriptor) }
                descriptor = -1
            }
        }
    }

    /// The reading thread: waits in a blocking `recv`, then delivers that datagram and any that
    /// came meanwhile in one `queue.sync`, until the end.
    private static func read(
        _ fd: Int32, queue: DispatchQueue, ended: EndFlag,
        onValue: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, onClose: @escaping @Sendable () -> Void
    ) {
        if let batch = BlueZDatagramBatch(capacity: batchCapacity) {
            return readInBatches(fd, batch, queue: queue, ended: ended, onValue: onValue, onClose: onClose)
        }
        // An ATT value is at most 512 bytes; a bigger buffer lets an oversized datagram show as one.
        let burst = Burst(buffer: UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 8))
        defer { burst.buffer.deallocate() }
        // One work item for the thread's life, run by every `queue.sync`: a closure passed to
        // `sync` becomes a new heap block each time (two allocations per notification).
        let visit = DispatchWorkItem { burst.peerGone = deliverBurst(fd, burst, ended: ended, onValue, onClose) }
        while !ended.value.load(ordering: .relaxed) {
            let first = receive(fd, into: burst.buffer, flags: 0)
            if ended.value.load(ordering: .relaxed) { return }  // close(): its shutdown woke us
            switch first {
            case .nothing:
                // Interrupted, or still non-blocking (fcntl failed): wait for data or the shutdown.
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, -1)
            case .end:
                if !ended.value.exchange(true, ordering: .relaxed) { queue.sync { onClose() } }
                return
            case .value(let count):
                burst.first = count
                queue.sync(execute: visit)
                if burst.peerGone { return }
            }
        }
    }

    /// The most datagrams one `recvmmsg` takes, and so one visit to the queue delivers.
    static let batchCapacity = 16

    /// The reading thread with `recvmmsg`: one call waits for a datagram and takes any that came
    /// with it (one system call per wake-up, not two), then one `queue.sync` delivers them all.
    private static func readInBatches(
        _ fd: Int32, _ batch: BlueZDatagramBatch, queue: DispatchQueue, ended: EndFlag,
        onValue: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, onClose: @escaping @Sendable () -> Void
    ) {
        let received = BatchVisit()
        let visit = DispatchWorkItem {
            received.peerGone = deliverBatch(fd, batch, count: received.count, ended: ended, onValue, onClose)
        }
        while !ended.value.load(ordering: .relaxed) {
            let count = batch.receive(fd)
            let error = errno
            if ended.value.load(ordering: .relaxed) { return }  // close(): its shutdown woke us
            if count <= 0 {
                guard count < 0, error == EAGAIN || error == EWOULDBLOCK || error == EINTR else {
                    if !ended.value.exchange(true, ordering: .relaxed) { queue.sync { onClose() } }
                    return
                }
                // Interrupted, or still non-blocking (fcntl failed): wait for data or the shutdown.
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, -1)
                continue
            }
            received.count = count
            queue.sync(execute: visit)
            if received.peerGone { return }
        }
    }

    /// On the queue: delivers the `count` datagrams of `batch`; an empty one is the end when the
    /// peer has gone (reported through `onClose`, and true returned).
    private static func deliverBatch(
        _ fd: Int32, _ batch: BlueZDatagramBatch, count: Int, ended: EndFlag,
        _ onValue: (UnsafeRawBufferPointer) -> Void, _ onClose: () -> Void
    ) -> Bool {
        for index in 0..<count {
            guard !ended.value.load(ordering: .relaxed) else { return false }
            let datagram = batch.datagram(index)
            if datagram.isEmpty && peerClosed(fd) {
                if !ended.value.exchange(true, ordering: .relaxed) { onClose() }
                return true
            }
            onValue(datagram)
        }
        return false
    }

    /// What the reading thread and its work item share: the buffer, the size of the datagram
    /// it received, and whether the peer went away during the visit.
    ///
    /// `@unchecked Sendable`: the thread writes `first` and reads `peerGone` only around its
    /// `queue.sync`, during which the work item (run on that same thread) reads and writes them.
    private final class Burst: @unchecked Sendable {
        let buffer: UnsafeMutableRawBufferPointer
        var first = 0
        var peerGone = false
        init(buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }
    }

    /// On the queue: delivers the datagram received (`burst.first` bytes) and those that came
    /// meanwhile (a burst costs one queue.sync and one recv more, not one each), up to
    /// `maximumBurst`: then the queue's other work runs before the next visit. True when the
    /// peer went away (reported through `onClose`).
    private static func deliverBurst(
        _ fd: Int32, _ burst: Burst, ended: EndFlag, _ onValue: (UnsafeRawBufferPointer) -> Void,
        _ onClose: () -> Void
    ) -> Bool {
        let buffer = burst.buffer
        func deliver(_ count: Int) { onValue(UnsafeRawBufferPointer(rebasing: buffer[..<count])) }
        guard !ended.value.load(ordering: .relaxed) else { return false }
        deliver(burst.first)
        var delivered = 1
        while !ended.value.load(ordering: .relaxed), delivered < maximumBurst {
            delivered += 1
            switch receive(fd, into: buffer, flags: Int32(MSG_DONTWAIT)) {
            case .value(let count): deliver(count)
            case .nothing: return false
            case .end:
                if !ended.value.exchange(true, ordering: .relaxed) { onClose() }
                return true
            }
        }
        return false
    }

    /// How many datagrams the batch holds, and whether the peer went away during the visit.
    ///
    /// `@unchecked Sendable`: as ``Burst``, used only around and inside the thread's `queue.sync`.
    private final class BatchVisit: @unchecked Sendable {
        var count = 0
        var peerGone = false
    }

    /// What one `recv` gave.
    private enum Received {
        /// A datagram of this many bytes (0: an empty notification, a value).
        case value(Int)
        /// Nothing yet (`EAGAIN`, `EINTR`).
        case nothing
        /// bluetoothd closed its end, or reading failed.
        case end
    }

    /// One `recv`: recv returns 0 both for an empty datagram and at the end of the stream; only
    /// the hang-up tells them apart.
    private static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: Int32) -> Received {
        let count = recv(fd, buffer.baseAddress, buffer.count, flags)
        if count > 0 || (count == 0 && !peerClosed(fd)) { return .value(count) }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return .nothing }
        return .end
    }

    /// Whether the other end of `fd` has gone (`POLLHUP` / `POLLRDHUP`).
    private static func peerClosed(_ fd: Int32) -> Bool {
        let rdhup = Int16(0x2000)  // POLLRDHUP, which Glibc does not export to Swift
        var entry = pollfd(fd: fd, events: rdhup, revents: 0)
        guard poll(&entry, 1, 0) >= 0 else { return true }
        return entry.revents & (Int16(POLLHUP | POLLERR) | rdhup) != 0
    }

    /// Releases the notification session: our end shuts down (bluetoothd then unsubscribes, as
    /// when it closes) and the reading thread, woken by it, closes the descriptor. Idempotent;
    /// never waits for that thread.
    package func close() {
        guard !ended.value.exchange(true, ordering: .relaxed) else {
            // Ended by bluetoothd or an error: the thread closes the descriptor on its way out.
            return
        }
        ended.descriptor.withLock { descriptor in
            if descriptor >= 0 { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    deinit { close() }
}

/// Whether the session has ended (so `onClose` runs at most once, and never after `close()`),
/// and the descriptor while the reading thread has it open (-1 after it closed it).
private final class EndFlag: Sendable {
    let value = Atomic<Bool>(false)
    let descriptor = PosixMutex<Int32>(-1)
}
