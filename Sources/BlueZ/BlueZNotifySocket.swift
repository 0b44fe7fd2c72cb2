package import DBus
package import Dispatch
import Foundation
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
/// A thread of its own waits in `poll` and hands the datagrams to `onValue` inside
/// `queue.sync`: on an idle serial queue libdispatch runs that block on the waiting thread
/// itself, so a notification costs one thread wake-up, not the two of a dispatch source (its
/// manager thread, then a worker for the queue) — what a small board's CPU pays most for
/// (measured: 1.81 → 1.21 ms of CPU per notification in the emulated environment). The values
/// still run on `queue`, after anything queued there before.
/// `@unchecked Sendable`: its stored properties are constants (an atomic flag, descriptors).
package final class BlueZNotifySocket: @unchecked Sendable {
    /// The ATT MTU bluetoothd reported with the socket.
    package let mtu: Int
    private let ended = EndFlag()
    /// Written to by ``close()`` to wake the reading thread.
    private let wakeWrite: Int32

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
        // A socket pair, not a pipe: waking a thread that already ended must not raise SIGPIPE.
        var wake: [Int32] = [-1, -1]
        if socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &wake) != 0 {
            wake = [-1, -1]
        }
        wakeWrite = wake[1]
        let wakeRead = wake[0]
        let ended = self.ended
        Thread.detachNewThread {
            Self.read(fd, wake: wakeRead, queue: queue, ended: ended, onValue: onValue, onClose: onClose)
            _ = Glibc.close(fd)
            if wakeRead >= 0 { _ = Glibc.close(wakeRead) }
        }
    }

    /// The reading thread: waits, then drains every datagram on `queue`, until the end.
    private static func read(
        _ fd: Int32, wake: Int32, queue: DispatchQueue, ended: EndFlag,
        onValue: @Sendable (UnsafeRawBufferPointer) -> Void, onClose: @Sendable () -> Void
    ) {
        // An ATT value is at most 512 bytes; a bigger buffer lets an oversized datagram show as one.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 8)
        defer { buffer.deallocate() }
        var watched = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while !ended.value.load(ordering: .relaxed) {
            let ready = poll(&watched, wake >= 0 ? 2 : 1, -1)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 || (wake >= 0 && watched[1].revents != 0) { return }
            let peerGone = queue.sync { () -> Bool in
                while !ended.value.load(ordering: .relaxed) {
                    let count = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
                    if count > 0 || (count == 0 && !peerClosed(fd)) {
                        // An empty datagram is an empty notification, not the end: recv returns 0
                        // for both, and only the hang-up tells them apart.
                        onValue(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                        continue
                    }
                    if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return false }
                    // End of stream (bluetoothd closed its end); any other error ends it too.
                    if !ended.value.exchange(true, ordering: .relaxed) { onClose() }
                    return true
                }
                return false
            }
            if peerGone { return }
        }
    }

    /// Whether the other end of `fd` has gone (`POLLHUP` / `POLLRDHUP`).
    private static func peerClosed(_ fd: Int32) -> Bool {
        let rdhup = Int16(0x2000)  // POLLRDHUP, which Glibc does not export to Swift
        var entry = pollfd(fd: fd, events: rdhup, revents: 0)
        guard poll(&entry, 1, 0) >= 0 else { return true }
        return entry.revents & (Int16(POLLHUP | POLLERR) | rdhup) != 0
    }

    /// Releases the notification session: our end closes (bluetoothd then unsubscribes) as the
    /// reading thread ends. Idempotent; never waits for that thread.
    package func close() {
        ended.value.store(true, ordering: .relaxed)
        guard wakeWrite >= 0, !ended.wakeClosed.exchange(true, ordering: .relaxed) else { return }
        var byte: UInt8 = 1
        _ = send(wakeWrite, &byte, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        _ = Glibc.close(wakeWrite)
    }

    deinit { close() }
}

/// Whether the session has ended (so `onClose` runs at most once, and never after `close()`).
private final class EndFlag: Sendable {
    let value = Atomic<Bool>(false)
    /// Whether ``BlueZNotifySocket/close()`` closed the waking end already.
    let wakeClosed = Atomic<Bool>(false)
}
