import DBus
package import Dispatch
import Locking

#if canImport(Glibc)
    import Glibc
#endif

/// A listening kernel L2CAP socket for LE credit-based channels: the kernel picks a free dynamic
/// PSM (bind with PSM 0, read back with `getsockname`) and accepts channels to it beside
/// bluetoothd.
///
/// Queue-confined after creation: ``accept(_:)`` and ``close()`` run on `queue`, and `state` (a
/// ``QueueBound``) checks that on every access, so the compiler checks the class `Sendable`.
package final class BlueZL2CAPListener: Sendable {
    /// The PSM the kernel assigned (LE's dynamic range, 0x0080…0x00FF).
    package let psm: UInt16
    package let queue: DispatchQueue
    private let descriptor: SharedDescriptor
    private let acceptCall: BlueZAcceptCall
    private let state: QueueBound<State>

    private struct State {
        var source: DescriptorReadiness?
        var closed = false
        /// `accept` failures for want of descriptors or memory since the last channel accepted.
        var resourceFailures = 0
    }

    private var source: DescriptorReadiness? {
        get { state.value.source }
        _modify { yield &state.value.source }
    }
    private var closed: Bool {
        get { state.value.closed }
        _modify { yield &state.value.closed }
    }
    private var resourceFailures: Int {
        get { state.value.resourceFailures }
        _modify { yield &state.value.resourceFailures }
    }
    /// At most this many connections that failed on their own are skipped per wake-up; the
    /// watch then fires again, so that other work on the queue gets its turn.
    static let maximumSkippedPerWake = 64

    /// What the kernel says of one accepted channel.
    package struct Accepted: Sendable {
        package var socket: BlueZL2CAPSocket
        /// The central's address and its type.
        package var peer: BlueZL2CAPSocketAddress
    }

    /// Listens on the adapter with `adapterAddress` (every adapter when nil) at `security`.
    ///
    /// - Throws: ``BlueZSocketError``: `invalidAddress` for an address that is not
    ///   `AA:BB:CC:DD:EE:FF`; the kernel's error (`notSupported` without Bluetooth,
    ///   `addressInUse`, …) of `socket`, `bind`, `setsockopt(BT_SECURITY)`, `listen` or
    ///   `getsockname`.
    package init(adapterAddress: String?, security: BlueZL2CAPSecurity, queue: DispatchQueue)
        throws(BlueZSocketError)
    {
        let local = BlueZL2CAPSocketAddress(address: adapterAddress ?? "00:00:00:00:00:00", type: .lePublic, psm: 0)
        let descriptor = SharedDescriptor(try BlueZL2CAPSocketCalls.open(local: local, security: security))
        if case .failure(let error) = SystemCall.listen(descriptor.fd, backlog: 8) {
            throw BlueZSocketError(errno: error.rawValue, operation: "listen")
        }
        var raw = [UInt8](repeating: 0, count: 16)
        if case .failure(let error) = raw.withUnsafeMutableBytes({ SystemCall.localAddress(descriptor.fd, into: $0) }) {
            throw BlueZSocketError(errno: error.rawValue, operation: "getsockname")
        }
        guard let bound = BlueZL2CAPSocketAddress(decoding: raw), bound.psm != 0 else {
            throw BlueZSocketError(.invalidPSM, operation: "getsockname gave no PSM")
        }
        self.psm = bound.psm
        self.queue = queue
        self.descriptor = descriptor
        self.acceptCall = .system
        self.state = QueueBound(State(), queue: queue)
    }

    /// Takes over the listening, non-blocking `descriptor` (a `SOCK_SEQPACKET` socket of any
    /// family, for tests) and accepts on it with `acceptCall`.
    package init(adopting descriptor: Int32, psm: UInt16, queue: DispatchQueue, acceptCall: BlueZAcceptCall) {
        self.psm = psm
        self.queue = queue
        self.descriptor = SharedDescriptor(descriptor)
        self.acceptCall = acceptCall
        self.state = QueueBound(State(), queue: queue)
    }

    /// Accepts every channel to the PSM, calling `handler` on `queue` with each (or with the
    /// error that ends listening), until ``close()``.
    ///
    /// A system short of descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) does
    /// not end listening: accepting pauses 10 ms, doubling up to 1 s while it lasts, and goes on.
    /// A connection that failed on its own (`ECONNABORTED`, `EINTR`, a network error) is
    /// skipped. Only an error of the listening socket itself (`EBADF`, `EINVAL`…) ends it.
    package func accept(_ handler: @escaping @Sendable (Result<Accepted, BlueZSocketError>) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closed, source == nil else { return }
        source = DescriptorReadiness.repeating(descriptor, .readable, queue: queue) { [weak self] in
            self?.acceptPending(handler)
        }
    }

    private func acceptPending(_ handler: @escaping @Sendable (Result<Accepted, BlueZSocketError>) -> Void) {
        var skipped = 0
        while !closed {
            var raw = [UInt8](repeating: 0, count: 16)
            let result = raw.withUnsafeMutableBytes { acceptCall.call(descriptor.fd, $0) }
            let fd: Int32
            switch result {
            case .success(let accepted): fd = accepted
            case .failure(let error):
                switch BlueZAcceptCall.recovery(from: error) {
                case .waitForReadable: return
                case .acceptNext:
                    skipped += 1
                    if skipped >= Self.maximumSkippedPerWake { return }
                    continue
                case .backOff: return pause(after: error)
                case .stop:
                    close()
                    return handler(.failure(BlueZSocketError(errno: error.rawValue, operation: "accept")))
                }
            }
            resourceFailures = 0
            SystemCall.setCloseOnExec(fd)
            let socket = BlueZL2CAPSocket(adopting: fd, queue: queue)
            guard let peer = BlueZL2CAPSocketAddress(decoding: raw) else {
                socket.close()
                continue
            }
            handler(.success(Accepted(socket: socket, peer: peer)))
        }
    }

    /// Stops watching for a while after `accept` found the system short of resources (the
    /// connection stays pending, so the watch would fire at once), then watches again.
    private func pause(after error: BlueZAcceptCall.Errno) {
        resourceFailures += 1
        let delay = BlueZAcceptCall.backOffDelay(afterFailures: resourceFailures)
        BlueZLog.warning(
            "L2CAP PSM \(psm): accept failed (\(String(cString: strerror(error.rawValue)))); trying again in \(delay)")
        source?.setEnabled(false)
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
            guard let self, !self.closed else { return }
            self.source?.setEnabled(true)
        }
    }

    /// Stops listening (channels accepted before stay open). Idempotent; on `queue`.
    package func close() {
        guard !closed else { return }
        closed = true
        SystemCall.shutdown(descriptor.fd, Int32(SHUT_RDWR))
        source?.cancel()
        source = nil
    }

    /// The last reference may go on any thread: the watch is cancelled on the queue.
    deinit { queue.async { [state] in state.value.source?.cancel() } }
}

/// The socket calls an L2CAP socket is made with.
enum BlueZL2CAPSocketCalls {
    static let afBluetooth: Int32 = 31
    static let btprotoL2CAP: Int32 = 0
    static let solBluetooth: Int32 = 274
    static let securityOption: Int32 = 4  // BT_SECURITY
    static let sendMTUOption: Int32 = 12  // BT_SNDMTU
    static let receiveMTUOption: Int32 = 13  // BT_RCVMTU

    /// A non-blocking L2CAP socket bound to `local`, asking for `security`.
    static func open(local: BlueZL2CAPSocketAddress, security: BlueZL2CAPSecurity) throws(BlueZSocketError) -> Int32 {
        guard let address = local.encoded() else {
            throw BlueZSocketError(.invalidAddress, operation: "adapter address \"\(local.address)\"")
        }
        let type = Int32(SOCK_SEQPACKET.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        let fd: Int32
        switch SystemCall.socket(afBluetooth, type, btprotoL2CAP) {
        case .success(let opened): fd = opened
        case .failure(let error):
            throw BlueZSocketError(errno: error.rawValue, operation: "socket(AF_BLUETOOTH, BTPROTO_L2CAP)")
        }
        if case .failure(let error) = address.withUnsafeBytes({ SystemCall.bind(fd, to: $0) }) {
            SystemCall.close(fd)
            throw BlueZSocketError(errno: error.rawValue, operation: "bind to \(local.address)")
        }
        let level: (UInt8, UInt8) = (security.rawValue, 0)  // struct bt_security { level, key_size }
        let secured = withUnsafeBytes(of: level) {
            SystemCall.setOption(fd, level: solBluetooth, name: securityOption, $0)
        }
        if case .failure(let error) = secured {
            SystemCall.close(fd)
            throw BlueZSocketError(errno: error.rawValue, operation: "setsockopt(BT_SECURITY)")
        }
        return fd
    }

    /// Starts a non-blocking connect; nil when it is under way (or done).
    static func connect(_ fd: Int32, to peer: BlueZL2CAPSocketAddress) -> BlueZSocketError? {
        guard let address = peer.encoded() else {
            return BlueZSocketError(.invalidAddress, operation: "peer address \"\(peer.address)\"")
        }
        guard case .failure(let error) = address.withUnsafeBytes({ SystemCall.connect(fd, to: $0) }) else { return nil }
        if error.rawValue == EINPROGRESS || error.rawValue == EAGAIN { return nil }
        return BlueZSocketError(errno: error.rawValue, operation: "connect to \(peer.address) PSM \(peer.psm)")
    }
}
