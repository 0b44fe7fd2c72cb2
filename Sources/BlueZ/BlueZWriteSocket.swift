package import DBus
package import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The socket `GattCharacteristic1.AcquireWrite` hands out: each datagram is one write without response.
///
/// bluetoothd (src/gatt-client.c, `sock_read`) turns every datagram it reads into an ATT Write
/// Command. The socket is non-blocking: when the kernel buffer is full ``send(_:)`` says so
/// instead of waiting, which is the flow control Core Bluetooth calls
/// `canSendWriteWithoutResponse`. bluetoothd closes its end when the link goes down or it exits;
/// that is reported once through `onClose`.
///
/// Queue-confined: create it, send and close on `queue` (the caller's serial queue).
package final class BlueZWriteSocket: @unchecked Sendable {
    /// The ATT MTU bluetoothd reported with the socket: a datagram carries at most `mtu - 3` bytes.
    package let mtu: Int
    private let queue: DispatchQueue
    private let fd: Int32
    private var hangup: DescriptorWatch?
    private var writable: DescriptorWatch?
    /// Counts ``whenWritable(_:)`` arms, so a fired wait knows whether it is still the current one.
    private var writableArms = 0
    private var closed = false
    private let sources: SourceCount

    /// What became of one datagram.
    package enum SendResult: Sendable, Equatable {
        case sent
        /// The socket is full: nothing was sent; try again after ``whenWritable(_:)``.
        case wouldBlock
        /// bluetoothd's end is gone (or we closed ours): nothing was sent.
        case closed
    }

    /// Takes over `descriptor`; `onClose` runs once on `queue` when bluetoothd closes its end.
    package init(
        descriptor: UnixFileDescriptor, mtu: UInt16, queue: DispatchQueue, onClose: @escaping @Sendable () -> Void
    ) {
        self.mtu = Int(mtu)
        self.queue = queue
        let fd = descriptor.take()
        self.fd = fd
        let sources = SourceCount(fd: fd)
        self.sources = sources
        // bluetoothd never writes to this socket: readable means end of stream (or stray bytes).
        hangup = DescriptorWatch.repeating(fd, .readable, queue: queue) { [weak self] in
            var byte: UInt8 = 0
            switch withUnsafeMutableBytes(of: &byte, { SystemCall.receive(fd, into: $0, flags: Int32(MSG_DONTWAIT)) }) {
            case .success(let count) where count > 0: return
            case .failure(let error) where error.isWouldBlock: return
            case .success, .failure: break
            }
            guard let self, !self.closed else { return }
            self.close()
            onClose()
        } cancelled: {
            sources.release()
        }
    }

    /// Sends `bytes` as one datagram without blocking (on `queue`).
    package func send(_ bytes: [UInt8]) -> SendResult {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closed else { return .closed }
        switch bytes.withUnsafeBytes({ SystemCall.send(fd, $0, flags: Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }) {
        case .success: return .sent
        case .failure(let error) where error.isWouldBlock || error.rawValue == ENOBUFS: return .wouldBlock
        case .failure:
            close()
            return .closed
        }
    }

    /// Calls `body` once on `queue` when the socket has room again; at once when it is closed
    /// already. A wait cut short by ``close()`` or bluetoothd's hang-up is not called: the
    /// `onClose` of the initializer is.
    package func whenWritable(_ body: @escaping @Sendable () -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closed else { return body() }
        writable?.cancel()
        writableArms += 1
        let arm = writableArms
        sources.retain()
        writable = DescriptorWatch.oneShot(fd, .writable, queue: queue) { [weak self] in
            if let self, self.writableArms == arm { self.writable = nil }
            body()
        } cancelled: { [sources] in
            sources.release()
        }
    }

    /// Closes our end (bluetoothd then releases the write session). Idempotent; on `queue`.
    package func close() {
        guard !closed else { return }
        closed = true
        writable?.cancel()
        writable = nil
        // The last watch's `cancelled` closes the descriptor, once no watch has it.
        hangup?.cancel()
        hangup = nil
    }

    deinit {
        writable?.cancel()
        hangup?.cancel()
    }
}

/// Closes a descriptor once the last watch on it is cancelled (its `cancelled` ran). Queue-confined.
private final class SourceCount: @unchecked Sendable {
    private let fd: Int32
    private var count = 1

    init(fd: Int32) { self.fd = fd }

    func retain() { count += 1 }

    func release() {
        count -= 1
        if count == 0 { SystemCall.close(fd) }
    }
}
