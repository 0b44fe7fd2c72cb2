import DBus
package import Dispatch
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A connected kernel L2CAP socket of an LE credit-based channel (`AF_BLUETOOTH`,
/// `BTPROTO_L2CAP`, `SOCK_SEQPACKET`): each datagram is one SDU.
///
/// The kernel does the L2CAP work beside bluetoothd (which knows nothing of the channel): credits,
/// segmentation, reassembly. The socket is non-blocking: ``receive()`` and ``send(_:)`` say when
/// they would wait, and ``whenReadable(_:)`` / ``whenWritable(_:)`` call back once they can go on,
/// which is how the kernel's credit-based flow control reaches the caller.
///
/// Queue-confined: every method but the initializers runs on `queue`, and `state` (a
/// ``QueueBound``) checks that on every access, so the compiler checks the class `Sendable`.
/// The descriptor is closed once no watch has it.
package final class BlueZL2CAPSocket: Sendable {
    /// The largest SDU this side sends (`BT_SNDMTU`: the peer's MTU).
    package let sendMTU: Int
    /// The largest SDU this side receives (`BT_RCVMTU`).
    package let receiveMTU: Int
    package let queue: DispatchQueue
    private let descriptor: SharedDescriptor
    private var fd: Int32 { descriptor.fd }
    private let state: QueueBound<State>

    private struct State {
        var closed = false
        var readable: DescriptorReadiness?
        var writable: DescriptorReadiness?
        /// Counts arms, so a fired watch knows whether it is still the current one.
        var readableArms = 0
        var writableArms = 0
        var buffer: [UInt8]
    }

    /// What became of one ``receive()``.
    package enum ReceiveResult: Sendable, Equatable {
        /// One SDU.
        case datagram([UInt8])
        /// Nothing to read now: ask ``whenReadable(_:)``.
        case wouldBlock
        /// The channel ended: the peer closed it (nil), or an error ended it.
        case closed(BlueZSocketError?)
    }

    /// What became of one ``send(_:)``.
    package enum SendResult: Sendable, Equatable {
        case sent
        /// No credits or buffer room: nothing was sent; try again after ``whenWritable(_:)``.
        case wouldBlock
        /// Nothing was sent and nothing will be: the channel ended or the SDU was refused.
        case failed(BlueZSocketError)
    }

    /// Takes over the connected, non-blocking `descriptor` (one of ``connect(from:to:security:queue:completion:)``,
    /// of a listener, or of a `socketpair` in tests). MTUs the kernel does not report take
    /// `defaultMTU`.
    package convenience init(adopting descriptor: Int32, queue: DispatchQueue, defaultMTU: Int = 672) {
        self.init(SharedDescriptor(descriptor), queue: queue, defaultMTU: defaultMTU)
    }

    private init(_ descriptor: SharedDescriptor, queue: DispatchQueue, defaultMTU: Int = 672) {
        self.descriptor = descriptor
        let descriptor = descriptor.fd
        self.queue = queue
        SystemCall.setNonBlocking(descriptor, true)
        self.sendMTU = Self.option(descriptor, BlueZL2CAPSocketCalls.sendMTUOption) ?? defaultMTU
        self.receiveMTU = Self.option(descriptor, BlueZL2CAPSocketCalls.receiveMTUOption) ?? defaultMTU
        self.state = QueueBound(State(buffer: [UInt8](repeating: 0, count: max(receiveMTU, 1) + 1)), queue: queue)
    }

    private static func option(_ fd: Int32, _ name: Int32) -> Int? {
        var value: UInt16 = 0
        let read = withUnsafeMutableBytes(of: &value) {
            SystemCall.option(fd, level: BlueZL2CAPSocketCalls.solBluetooth, name: name, into: $0)
        }
        guard case .success = read, value > 0 else { return nil }
        return Int(value)
    }

    /// Opens an LE credit-based channel from the adapter with `adapterAddress` (any adapter when
    /// nil) to `peer`'s PSM, at `security`, and calls `completion` once on `queue` with the
    /// connected socket or the error. Bad input is reported through `completion` too.
    ///
    /// The kernel uses the existing LE link to the peer (or makes one). It bounds the wait itself
    /// (the socket's send time-out, 40 s).
    package static func connect(
        from adapterAddress: String?, to peer: BlueZL2CAPSocketAddress, security: BlueZL2CAPSecurity,
        queue: DispatchQueue, completion: @escaping @Sendable (Result<BlueZL2CAPSocket, BlueZSocketError>) -> Void
    ) {
        let descriptor: SharedDescriptor
        do throws(BlueZSocketError) {
            guard peer.encoded() != nil else {
                throw BlueZSocketError(.invalidAddress, operation: "peer address \"\(peer.address)\"")
            }
            guard (1...0xFF).contains(peer.psm) else {
                throw BlueZSocketError(.invalidPSM, operation: "connect to PSM \(peer.psm)")
            }
            let local = BlueZL2CAPSocketAddress(
                address: adapterAddress ?? "00:00:00:00:00:00", type: .lePublic, psm: 0)
            descriptor = SharedDescriptor(try BlueZL2CAPSocketCalls.open(local: local, security: security))
            if let error = BlueZL2CAPSocketCalls.connect(descriptor.fd, to: peer) { throw error }
        } catch {
            return queue.async { completion(.failure(error)) }
        }
        // Non-blocking connect: writable once the channel is up or failed; SO_ERROR says which.
        // The descriptor stays open until the watch's `cancelled` has run.
        let connected: @Sendable () -> Void = {
            if let error = SystemCall.pendingError(descriptor.fd) {
                completion(.failure(BlueZSocketError(errno: error.rawValue, operation: "connect to PSM \(peer.psm)")))
            } else {
                completion(.success(BlueZL2CAPSocket(descriptor, queue: queue)))
            }
        }
        _ = DescriptorReadiness.oneShot(descriptor, .writable, queue: queue, fired: connected)
    }

    /// Reads one SDU without waiting (on `queue`).
    package func receive() -> ReceiveResult {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !state.value.closed else { return .closed(BlueZSocketError(.closed, operation: "receive")) }
        let fd = self.fd
        let received = state.value.buffer.withUnsafeMutableBytes {
            SystemCall.receive(fd, into: $0, flags: Int32(MSG_DONTWAIT))
        }
        switch received {
        case .success(let count) where count > 0: return .datagram(Array(state.value.buffer[0..<count]))
        case .success: return .closed(nil)
        case .failure(let error) where error.isWouldBlock: return .wouldBlock
        case .failure(let error): return .closed(BlueZSocketError(errno: error.rawValue, operation: "receive"))
        }
    }

    /// Sends `bytes` as one SDU without waiting (on `queue`); an empty or too long SDU fails.
    package func send(_ bytes: some Collection<UInt8>) -> SendResult {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !state.value.closed else { return .failed(BlueZSocketError(.closed, operation: "send")) }
        guard !bytes.isEmpty, bytes.count <= sendMTU else {
            return .failed(BlueZSocketError(.messageTooLong, operation: "send \(bytes.count) bytes (MTU \(sendMTU))"))
        }
        switch Array(bytes).withUnsafeBytes({ SystemCall.send(fd, $0, flags: Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }) {
        case .success: return .sent
        case .failure(let error) where error.isWouldBlock || error.rawValue == ENOBUFS: return .wouldBlock
        case .failure(let error): return .failed(BlueZSocketError(errno: error.rawValue, operation: "send"))
        }
    }

    /// Calls `body` once on `queue` when a ``receive()`` has something to say (a datagram, the
    /// end); at once when closed. A later call replaces an earlier wait, which is then not called.
    package func whenReadable(_ body: @escaping @Sendable () -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !state.value.closed else { return queue.async(execute: body) }
        state.value.readable?.cancel()
        state.value.readableArms += 1
        let arm = state.value.readableArms
        state.value.readable = self.arm(.readable) { [weak self] in
            if let self, self.state.value.readableArms == arm { self.state.value.readable = nil }
            body()
        }
    }

    /// Calls `body` once on `queue` when a ``send(_:)`` can go on; at once when closed. A later
    /// call replaces an earlier wait, which is then not called.
    package func whenWritable(_ body: @escaping @Sendable () -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !state.value.closed else { return queue.async(execute: body) }
        state.value.writable?.cancel()
        state.value.writableArms += 1
        let arm = state.value.writableArms
        state.value.writable = self.arm(.writable) { [weak self] in
            if let self, self.state.value.writableArms == arm { self.state.value.writable = nil }
            body()
        }
    }

    private func arm(
        _ condition: DescriptorReadiness.Condition, fired: @escaping @Sendable () -> Void
    ) -> DescriptorReadiness {
        // The descriptor stays open until the watch's `cancelled` has run.
        DescriptorReadiness.oneShot(descriptor, condition, queue: queue, fired: fired)
    }

    /// Ends the channel (`shutdown`: the kernel sends the peer a disconnection request). Pending
    /// waits are dropped; the descriptor is closed when the last reference to it goes.
    /// Idempotent; on `queue`.
    package func close() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !state.value.closed else { return }
        state.value.closed = true
        SystemCall.shutdown(fd, Int32(SHUT_RDWR))
        state.value.readable?.cancel()
        state.value.writable?.cancel()
        state.value.readable = nil
        state.value.writable = nil
    }

    /// The last reference may go on any thread: the waits are cancelled on the queue, where
    /// their state is (a wait firing meanwhile finds no socket and calls its body, as before).
    deinit {
        queue.async { [state] in
            state.value.readable?.cancel()
            state.value.writable?.cancel()
        }
    }
}
