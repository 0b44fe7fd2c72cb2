import DBus
package import Dispatch
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// Our end of the socket a local characteristic hands bluetoothd in `AcquireNotify`, for one
/// subscribed device (bluetoothd ≥ 5.69; see ``BlueZServerFeatures/perDeviceNotifySockets``).
///
/// Each datagram written here is one notification or indication of the characteristic
/// (`sock_io_read` in `src/gatt-database.c` reads at most 512 bytes at a time); from 5.76 it goes
/// to this device only. From 5.80 bluetoothd writes one byte `0x01` back for each indication the
/// device confirmed (`sock_io_conf`). bluetoothd closes its end when the device writes 0 to the
/// Client Characteristic Configuration descriptor, when the link ends, or when it exits.
///
/// The socket is non-blocking: ``send(_:)`` says when it is full, and ``whenWritable(_:)`` tells
/// when it has room — the per-device back-pressure Core Bluetooth calls
/// `peripheralManagerIsReady(toUpdateSubscribers:)`. Events come on `queue`; ``send(_:)``,
/// ``hasRoom`` and ``close()`` may be called from any thread.
/// `Sendable` as the compiler checks it: the descriptor is a constant, everything mutable is
/// behind `state` (a lock).
package final class BlueZNotifyLink: Sendable {
    /// The remote device's address (`device` option).
    package let deviceAddress: String
    /// The ATT MTU of the device's link (`mtu` option): a datagram carries at most `mtu - 3` bytes.
    package let mtu: Int
    private let fd: Int32
    private let queue: DispatchQueue
    private let state = PosixMutex(State())

    private struct State: BlueZWritableWaitHolder {
        var closed = false
        /// Until closed; the watches keep it open, each until its `cancelled` has run, so it is
        /// closed after the last of them.
        var descriptor: SharedDescriptor?
        var reader: DescriptorReadiness?
        var writableWait = BlueZWritableWait()
    }

    /// What became of one datagram.
    package enum SendResult: Sendable, Equatable {
        case sent
        /// The socket is full: nothing was sent; try again after ``whenWritable(_:)``.
        case wouldBlock
        /// bluetoothd's end is gone (or we closed ours): nothing was sent.
        case closed
    }

    /// Takes over `fd` (non-blocking) and starts reading it on `queue`.
    ///
    /// - Parameters:
    ///   - onConfirm: called on `queue` for each confirmation bluetoothd writes back.
    ///   - onClose: called once on `queue` when bluetoothd closed its end; not after ``close()``.
    package init(
        fd: Int32, deviceAddress: String, mtu: UInt16, queue: DispatchQueue,
        onConfirm: @escaping @Sendable (BlueZNotifyLink) -> Void, onClose: @escaping @Sendable (BlueZNotifyLink) -> Void
    ) {
        self.fd = fd
        self.deviceAddress = deviceAddress
        self.mtu = Int(mtu)
        self.queue = queue
        let descriptor = SharedDescriptor(fd)
        let reader = DescriptorReadiness.repeating(descriptor, .readable, queue: queue) { [weak self] in
            guard let self else { return }
            var buffer = [UInt8](repeating: 0, count: 16)
            while true {
                let received = buffer.withUnsafeMutableBytes {
                    SystemCall.receive(fd, into: $0, flags: Int32(MSG_DONTWAIT))
                }
                if case .failure(let error) = received, error.isWouldBlock { return }
                guard case .success(let count) = received, count > 0 else {
                    if self.shutDown() { onClose(self) }
                    return
                }
                // One byte per confirmation; anything else is not bluetoothd's and is ignored.
                for byte in buffer[..<count] where byte == 1 { onConfirm(self) }
            }
        }
        state.withLock {
            $0.reader = reader
            $0.descriptor = descriptor
        }
    }

    /// Sends `bytes` as one datagram without blocking.
    package func send(_ bytes: [UInt8]) -> SendResult {
        guard !state.withLock({ $0.closed }) else { return .closed }
        switch bytes.withUnsafeBytes({ SystemCall.send(fd, $0, flags: Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }) {
        case .success: return .sent
        case .failure(let error) where error.isWouldBlock || error.rawValue == ENOBUFS: return .wouldBlock
        case .failure: return .closed
        }
    }

    /// Whether a datagram can be sent now without blocking (false once closed).
    package var hasRoom: Bool {
        guard !state.withLock({ $0.closed }) else { return false }
        guard case .success(let revents) = SystemCall.poll(fd, events: Int16(POLLOUT), timeout: 0) else { return false }
        return revents & Int16(POLLOUT) != 0
    }

    /// Calls `body` once on `queue` when the socket has room again; at once when it is closed
    /// already. A wait cut short by the link closing is not called: `onClose` is.
    package func whenWritable(_ body: @escaping @Sendable () -> Void) {
        if !state.armWritableWait(queue: queue, body) { queue.async(execute: body) }
    }

    /// Closes our end: bluetoothd ends the device's subscription. Idempotent.
    package func close() { _ = shutDown() }

    /// Marks the link closed and stops watching it; true the first time.
    private func shutDown() -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.closed = true
            state.reader?.cancel()
            state.writableWait.cancel()
            state.reader = nil
            // The last watch's `cancelled` closes the descriptor, once no watch has it.
            state.descriptor = nil
            return true
        }
    }

    deinit { _ = shutDown() }
}
