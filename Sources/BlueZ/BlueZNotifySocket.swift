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
/// A ``DescriptorReadiness`` of its own (`.dedicated(.receive)`) waits in a blocking receive and
/// hands the datagrams to `onValue` inside `queue.sync`: on an idle serial queue libdispatch runs
/// that block on the waiting thread itself, so a notification costs one thread wake-up, not the
/// two of a dispatch source (its manager thread, then a worker for the queue) — what a small
/// board's CPU pays most for (`Scripts/benchmark --only fd_notify` measures this path) — and one
/// system call: a `recvmmsg` that waits for a datagram and takes those that came with it, all
/// delivered in the same `queue.sync` (``BlueZDatagramBatch``; where `recvmmsg` is missing, one
/// `recv` and one visit per datagram).
/// The values still run on `queue`, after anything queued there before. ``close()`` cancels the
/// registration, which wakes its thread with `shutdown(2)` under the lock the thread also takes
/// to close the descriptor, so it never reaches a number the process has reused.
/// `Sendable` as the compiler checks it: its stored properties are constants.
package final class BlueZNotifySocket: Sendable {
    /// The ATT MTU bluetoothd reported with the socket.
    package let mtu: Int
    /// The most datagrams one `recvmmsg` takes, and so one visit to the queue delivers: a peer
    /// that keeps sending must not keep the queue (serving everything else) for ever.
    static let batchCapacity = 16
    private let ended = EndFlag()
    private let reader: DescriptorReadiness

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
        SystemCall.setNonBlocking(fd, false)
        let ended = self.ended
        // Filled by the reading thread, read inside its `queue.sync`, which orders the two.
        nonisolated(unsafe) let batch = BlueZDatagramBatch(capacity: Self.batchCapacity)
        let taken = BatchCount()
        reader = DescriptorReadiness.dedicated(
            fd,
            .receive { fd in
                // One `recvmmsg` waits for a datagram and takes any that came with it.
                switch batch.receive(fd) {
                case .success(let count) where count > 0:
                    taken.value.store(count, ordering: .relaxed)
                case .failure(let error) where error.isWouldBlock:
                    // Still non-blocking (fcntl failed): wait for data or the shutdown.
                    _ = SystemCall.poll(fd, events: Int16(POLLIN), timeout: -1)
                    return false
                case .success, .failure:
                    taken.value.store(-1, ordering: .relaxed)  // the end, reported on the queue
                }
                return true
            }, closesDescriptor: true, queue: queue
        ) {
            let count = taken.value.load(ordering: .relaxed)
            guard count >= 0 else {
                if !ended.value.exchange(true, ordering: .relaxed) { onClose() }
                return false
            }
            return !Self.deliverBatch(fd, batch, count: count, ended: ended, onValue, onClose)
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

    /// How many datagrams the batch holds (-1: reading failed or the stream ended).
    ///
    /// The thread writes it only before its `queue.sync`, during which the handler reads it:
    /// `queue.sync` orders the accesses, so a relaxed atomic (a plain load and store) is enough,
    /// and the compiler checks the class `Sendable`.
    private final class BatchCount: Sendable {
        let value = Atomic<Int>(0)
    }

    /// Whether the other end of `fd` has gone (`POLLHUP` / `POLLRDHUP`).
    private static func peerClosed(_ fd: Int32) -> Bool {
        let rdhup = Int16(0x2000)  // POLLRDHUP, which Glibc does not export to Swift
        guard case .success(let revents) = SystemCall.poll(fd, events: rdhup, timeout: 0) else { return true }
        return revents & (Int16(POLLHUP | POLLERR) | rdhup) != 0
    }

    /// Releases the notification session: our end shuts down (bluetoothd then unsubscribes, as
    /// when it closes) and the reading thread, woken by it, closes the descriptor. Idempotent;
    /// never waits for that thread.
    package func close() {
        // Ended by bluetoothd or an error: the thread closes the descriptor on its way out.
        guard !ended.value.exchange(true, ordering: .relaxed) else { return }
        reader.cancel()
    }

    deinit { close() }
}

/// Whether the session has ended (so `onClose` runs at most once, and never after `close()`).
private final class EndFlag: Sendable {
    let value = Atomic<Bool>(false)
}
