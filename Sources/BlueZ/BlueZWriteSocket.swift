package import DBus
package import Dispatch
import Locking
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
/// Used on `queue` (the caller's serial queue): send, wait and close there. `Sendable` as the
/// compiler checks it: what changes is behind `state`, a lock rather than a queue-checking box
/// because the initializer (which arms the hang-up watch) and `deinit` may run off the queue.
package final class BlueZWriteSocket: Sendable {
    /// The ATT MTU bluetoothd reported with the socket: a datagram carries at most `mtu - 3` bytes.
    package let mtu: Int
    private let queue: DispatchQueue
    private let fd: Int32
    private let state = PosixMutex(State())

    private struct State: BlueZWritableWaitHolder {
        var hangup: DescriptorReadiness?
        var writableWait = BlueZWritableWait()
        var closed = false
        /// Until closed; the watches keep it open, each until its `cancelled` has run, so it is
        /// closed after the last of them.
        var descriptor: SharedDescriptor?
    }

    private var closed: Bool { state.withLock { $0.closed } }

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
        let descriptor = SharedDescriptor(fd)
        // bluetoothd never writes to this socket: readable means end of stream (or stray bytes).
        let hangup = DescriptorReadiness.repeating(descriptor, .readable, queue: queue) { [weak self] in
            var byte: UInt8 = 0
            switch withUnsafeMutableBytes(of: &byte, { SystemCall.receive(fd, into: $0, flags: Int32(MSG_DONTWAIT)) }) {
            case .success(let count) where count > 0: return
            case .failure(let error) where error.isWouldBlock: return
            case .success, .failure: break
            }
            guard let self, !self.closed else { return }
            self.close()
            onClose()
        }
        state.withLock {
            $0.hangup = hangup
            $0.descriptor = descriptor
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
        if !state.armWritableWait(queue: queue, body) { body() }
    }

    /// Closes our end (bluetoothd then releases the write session). Idempotent; on `queue`.
    package func close() {
        state.withLock { state in
            guard !state.closed else { return }
            state.closed = true
            state.writableWait.cancel()
            // The last watch's `cancelled` closes the descriptor, once no watch has it.
            state.hangup?.cancel()
            state.hangup = nil
            state.descriptor = nil
        }
    }

    deinit {
        state.withLock { state in
            state.writableWait.cancel()
            state.hangup?.cancel()
        }
    }
}
