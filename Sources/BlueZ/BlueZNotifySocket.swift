package import DBus
package import Dispatch
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
/// The datagrams are read on `queue` by a dispatch source and handed to `onValue` there, so a
/// caller that passes its delegate queue reaches its delegate with no further hop.
/// `@unchecked Sendable`: its only stored properties are a constant, an atomic and the dispatch
/// source, whose `cancel()` may be called from any thread.
package final class BlueZNotifySocket: @unchecked Sendable {
    /// The ATT MTU bluetoothd reported with the socket.
    package let mtu: Int
    private let source: any DispatchSourceRead
    private let ended = EndFlag()

    /// Takes over `descriptor` and starts reading on `queue`.
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
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        self.source = source
        let ended = self.ended
        // An ATT value is at most 512 bytes; a bigger buffer lets an oversized datagram show as one.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 8)
        source.setEventHandler { [source] in
            // `ended`, not `source.isCancelled`: the protocol requirement costs a dynamic cast per call.
            while !ended.value.load(ordering: .relaxed) {
                let count = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
                if count > 0 || (count == 0 && !Self.peerClosed(fd)) {
                    // An empty datagram is an empty notification, not the end: recv returns 0 for
                    // both, and only the hang-up tells them apart.
                    onValue(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                    continue
                }
                if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return }
                // End of stream (bluetoothd closed its end); any other error ends it too.
                source.cancel()
                if !ended.value.exchange(true, ordering: .relaxed) { onClose() }
                return
            }
        }
        source.setCancelHandler {
            _ = Glibc.close(fd)
            buffer.deallocate()
        }
        source.resume()
    }

    /// Whether the other end of `fd` has gone (`POLLHUP` / `POLLRDHUP`).
    private static func peerClosed(_ fd: Int32) -> Bool {
        let rdhup = Int16(0x2000)  // POLLRDHUP, which Glibc does not export to Swift
        var entry = pollfd(fd: fd, events: rdhup, revents: 0)
        guard poll(&entry, 1, 0) >= 0 else { return true }
        return entry.revents & (Int16(POLLHUP | POLLERR) | rdhup) != 0
    }

    /// Releases the notification session: closes our end (bluetoothd then unsubscribes). Idempotent.
    package func close() {
        ended.value.store(true, ordering: .relaxed)
        source.cancel()
    }

    deinit { source.cancel() }
}

/// Whether the session has ended (so `onClose` runs at most once, and never after `close()`).
private final class EndFlag: Sendable {
    let value = Atomic<Bool>(false)
}
