internal import DBus
import Dispatch
import Glibc

/// `AcquireWrite` and `AcquireNotify` of remote characteristics (`src/gatt-client.c` of bluetoothd 5.66:
/// `create_sock`, `sock_read`, `sock_hup`, `destroy_sock`, `notify_io_cb`).
///
/// Each acquisition is a `socketpair(AF_UNIX, SOCK_SEQPACKET)`: the caller gets one end through the
/// `h` argument of the reply, the simulator keeps the other, watched by a read source on `queue`
/// (so its events are turns of the loop like any other). What 5.66 does, the simulator does:
/// - both sockets are read: each datagram the client sends (up to 512 bytes, the rest of a longer
///   one is lost) becomes a write without response to the value handle — dropped silently when
///   longer than the ATT MTU less 3, as `bt_att_send` refuses it. Even the notify socket is read.
/// - a read of 0 bytes (an empty datagram, or end of file) or a read error stops the reading for
///   good; the socket then stays acquired until it hangs up (`sock_read` returns false, which
///   removes only the read watch). The simulator then checks for the hang-up every 20 ms
///   rather than with glib's separate `G_IO_HUP` watch.
/// - each notification goes to the notify socket as one datagram (`MSG_DONTWAIT`), never to
///   `Value`; one that would block is dropped.
/// - a hang-up (the client closed its end) or `StopNotify` ends the acquisition: `WriteAcquired`
///   or `NotifyAcquired` turns false and the notify registration goes (the CCCD off).
/// - the link going down closes bluetoothd's ends at once (`btd_gatt_client_disconnected` shuts
///   them down); the acquisitions end in a later turn, when their hang-up is seen. GATT objects
///   removed (no cache, device removed) and bluetoothd exiting close them silently.
/// - an acquisition made while connected but before the GATT client is ready (services not yet
///   resolved on a reconnection with a GATT cache) is answered once it is ready; if the link
///   drops first it is never answered and the characteristic stays acquired until its objects
///   go or `StopNotify` (5.66's ready callback dies with the link's GATT client).
extension SimulatorCore {
    /// How often a socket whose reading stopped is checked for the hang-up.
    static let hangUpPollInterval = Duration.milliseconds(20)

    // MARK: Methods

    /// `AcquireWrite` (`characteristic_acquire_write`).
    func acquireWrite(_ invocation: DBusMethodInvocation, _ characteristic: GATTNode.Characteristic) {
        guard let device = devices[characteristic.device], case .connected(let generation) = device.link,
            peripheral(of: device) != nil
        else {
            return reply(invocation, error: BlueZErrors.failed("Not connected"))
        }
        if characteristic.writeIO != nil { return reply(invocation, error: BlueZErrors.notPermitted("Write acquired")) }
        guard characteristic.flags.properties & AttributeFlags.writeWithoutResponse != 0 else {
            return reply(invocation, error: BlueZErrors.notSupported)
        }
        let io = AcquiredSocket(kind: .write, characteristic: characteristic.path, generation: generation, owner: nil)
        updateCharacteristic(characteristic.path) { $0.writeIO = io }
        guard device.servicesResolved else {
            // GATT not ready: wait until it becomes ready.
            io.pending = invocation
            return
        }
        createSocket(io, invocation)
    }

    /// `AcquireNotify` (`characteristic_acquire_notify`): the caller's notify session writes the CCCD
    /// (as `StartNotify`'s does) but leaves `Notifying` alone; the socket comes once the GATT client is ready.
    func acquireNotify(_ invocation: DBusMethodInvocation, _ characteristic: GATTNode.Characteristic, sender: String) {
        guard let device = devices[characteristic.device], case .connected(let generation) = device.link,
            peripheral(of: device) != nil
        else {
            return reply(invocation, error: BlueZErrors.failed("Not connected"))
        }
        if characteristic.notifyIO != nil {
            return reply(invocation, error: BlueZErrors.notPermitted("Notify acquired"))
        }
        // Each client can only have one active notify session (any client's session counts here).
        if !characteristic.notifyClients.isEmpty { return reply(invocation, error: BlueZErrors.inProgress) }
        guard characteristic.flags.properties & AttributeFlags.notify != 0 else {
            return reply(invocation, error: BlueZErrors.notSupported)
        }
        let io = AcquiredSocket(
            kind: .notify, characteristic: characteristic.path, generation: generation, owner: sender)
        io.pending = invocation
        updateCharacteristic(characteristic.path) { characteristic in
            characteristic.notifyClients.append(sender)
            characteristic.notifyIO = io
        }
        writeClientConfiguration(characteristic.path)
        // register_notify_io_cb: the socket once the GATT client is ready.
        if device.servicesResolved { finishPendingAcquisition(io) }
    }

    /// Answers an acquisition that waited for the GATT client (`characteristic_ready`).
    private func finishPendingAcquisition(_ io: AcquiredSocket) {
        guard let invocation = io.pending else { return }
        io.pending = nil
        createSocket(io, invocation)
    }

    /// `create_sock`: the socket pair, the reply with the caller's end and the MTU, and `…Acquired` true.
    private func createSocket(_ io: AcquiredSocket, _ invocation: DBusMethodInvocation) {
        guard let node = characteristicNode(io.characteristic), let device = devices[node.device], device.connected,
            device.servicesResolved
        else {
            return reply(invocation, error: BlueZErrors.failed("Not connected"))
        }
        let type = Int32(SOCK_SEQPACKET.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        let fds: [Int32]
        switch SystemCall.socketPair(AF_UNIX, type) {
        case .success(let pair): fds = [pair.0, pair.1]
        case .failure(let error):
            // As in 5.66, the characteristic stays acquired (its sock_io without an io).
            return reply(invocation, error: BlueZErrors.failed("\(error)"))
        }
        // bluetoothd keeps fds[!dir] and hands out fds[dir], dir being whether this is AcquireWrite.
        let kept = io.kind == .write ? fds[0] : fds[1]
        let handedOut = io.kind == .write ? fds[1] : fds[0]
        io.open(kept, queue: queue) { [weak self, weak io] in
            guard let self, let io else { return }
            self.socketReadable(io)
            self.flushSignals()
        }
        propertiesChanged(io.characteristic, Self.characteristicInterface, [io.kind.property])
        // The reply owns the caller's end: libdbus sends a duplicate, and ours closes with the reply's values.
        reply(invocation, [.unixFD(UnixFileDescriptor(owning: handedOut)), .uint16(device.mtu)])
    }

    // MARK: Ending

    /// `destroy_sock`: ends the acquisition whose socket is `target`'s. As in 5.66, the write one is
    /// matched by its socket (two acquisitions still waiting for theirs match each other) and
    /// anything else ends the notify one.
    func destroySocket(_ target: AcquiredSocket) {
        guard let node = characteristicNode(target.characteristic) else { return }
        let path = node.path
        if let write = node.writeIO, write === target || (!write.isOpened && !target.isOpened) {
            updateCharacteristic(path) { $0.writeIO = nil }
            dispose(write)
            propertiesChanged(path, Self.characteristicInterface, ["WriteAcquired"])
        } else if let notify = node.notifyIO {
            updateCharacteristic(path) { $0.notifyIO = nil }
            dispose(notify)
            propertiesChanged(path, Self.characteristicInterface, ["NotifyAcquired"])
        }
    }

    /// `StopNotify` on a characteristic whose notifications are acquired: the socket goes, whoever asks.
    func stopAcquiredNotify(_ node: GATTNode.Characteristic) {
        guard let notify = node.notifyIO else { return }
        destroySocket(notify)
    }

    /// `sock_io_destroy`: the notify registration goes (`notify_io_destroy`: the CCCD off while its link
    /// is up), a call still waiting is never answered, and bluetoothd's end is closed.
    private func dispose(_ io: AcquiredSocket) {
        if let owner = io.owner, let node = characteristicNode(io.characteristic),
            node.notifyClients.contains(owner)
        {
            updateCharacteristic(node.path) { $0.notifyClients.removeAll { $0 == owner } }
            if devices[node.device]?.link == .connected(generation: io.generation),
                characteristicNode(node.path)?.notifyClients.isEmpty == true,
                !batteryHolds(node.device, handle: node.valueHandle)
            {
                updateDevice(node.device) { $0.clientConfigurations[node.valueHandle] = nil }
            }
        }
        if let pending = io.pending {
            io.pending = nil
            hold(pending)
        }
        io.close()
    }

    /// The link went down (`btd_gatt_client_disconnected`): bluetoothd's ends close now (the callers
    /// read end of file); each acquisition ends in a later turn, as its hang-up is seen. Acquisitions
    /// still waiting for the GATT client stay waiting, never to be answered.
    func shutDownAcquiredSockets(_ device: ObjectPath) {
        for path in devices[device]?.gattPaths ?? [] {
            guard let node = characteristicNode(path) else { continue }
            for io in [node.writeIO, node.notifyIO].compactMap(\.self) where io.isOpened {
                io.close()
                perform(ifEpoch: epoch) {
                    guard self.isCurrent(io) else { return }
                    self.destroySocket(io)
                }
            }
        }
    }

    /// The characteristic's objects go (`characteristic_free`): its sockets close without a signal.
    func disposeAcquiredSockets(_ path: ObjectPath) {
        guard let node = characteristicNode(path) else { return }
        guard node.writeIO != nil || node.notifyIO != nil else { return }
        updateCharacteristic(path) { characteristic in
            characteristic.writeIO = nil
            characteristic.notifyIO = nil
        }
        for io in [node.writeIO, node.notifyIO].compactMap(\.self) { dispose(io) }
    }

    /// bluetoothd exits: every socket closes (the calls still waiting go with the old connection).
    func closeAllAcquiredSockets() {
        for case .characteristic(let node) in gattObjects.values {
            for io in [node.writeIO, node.notifyIO].compactMap(\.self) {
                io.pending = nil
                io.close()
            }
        }
    }

    /// The GATT client of `device` became ready: acquisitions made on this link while it was not are
    /// answered, in the next turn (after `ServicesResolved`, as 5.66's ready callbacks of the
    /// characteristics run after the device's own).
    func answerWaitingAcquisitions(_ device: ObjectPath) {
        guard case .connected(let generation) = devices[device]?.link else { return }
        for path in devices[device]?.gattPaths ?? [] {
            guard let node = characteristicNode(path) else { continue }
            for io in [node.writeIO, node.notifyIO].compactMap(\.self)
            where io.pending != nil && io.generation == generation {
                perform(ifEpoch: epoch) {
                    guard self.devices[device]?.link == .connected(generation: generation),
                        self.devices[device]?.servicesResolved == true
                    else { return }
                    self.finishPendingAcquisition(io)
                }
            }
        }
    }

    // MARK: Traffic

    /// `sock_read`, then `sock_hup`: each datagram from the caller becomes a write without response;
    /// a read of nothing stops the reading, and a hang-up ends the acquisition.
    ///
    /// Reads until nothing is left (libdispatch reports a hang-up that comes with data once, then
    /// never again), at most `socketReadBatch` datagrams per turn: the rest in a later turn.
    private func socketReadable(_ io: AcquiredSocket) {
        for _ in 0..<Self.socketReadBatch {
            guard isCurrent(io), io.isReading else { return }
            switch io.receive() {
            case .again:
                return
            case .datagram(let bytes):
                guard let node = characteristicNode(io.characteristic), let device = devices[node.device],
                    device.connected
                else {
                    return stopReading(io)
                }
                _ = writeWithoutResponse(node, bytes, device: device)
            case .nothing:
                return stopReading(io)
            }
        }
        perform(ifEpoch: epoch) { self.socketReadable(io) }
    }

    /// How many datagrams one turn reads from a socket.
    static let socketReadBatch = 32

    /// The read watch is gone: the socket stays acquired until it hangs up.
    private func stopReading(_ io: AcquiredSocket) {
        io.stopReading()
        checkHangUp(io)
    }

    private func checkHangUp(_ io: AcquiredSocket) {
        guard isCurrent(io), io.isOpened, !io.isClosed else { return }
        if io.hasHungUp { return destroySocket(io) }
        after(Self.hangUpPollInterval) { self.checkHangUp(io) }
    }

    /// `notify_io_cb`: a notification goes to the socket as one datagram; none while the socket is
    /// not there yet, and one that would block is dropped.
    func sendNotification(_ value: [UInt8], to io: AcquiredSocket) {
        _ = io.send(value)
    }

    // MARK: Helpers

    func characteristicNode(_ path: ObjectPath) -> GATTNode.Characteristic? {
        guard case .characteristic(let node) = gattObjects[path] else { return nil }
        return node
    }

    /// Whether `io` is still one of its characteristic's acquisitions.
    private func isCurrent(_ io: AcquiredSocket) -> Bool {
        guard let node = characteristicNode(io.characteristic) else { return false }
        return node.writeIO === io || node.notifyIO === io
    }
}

/// One acquisition of a remote characteristic (`struct sock_io`) and bluetoothd's end of its socket.
///
/// Confined to the simulator's queue (hence `@unchecked Sendable`). The descriptor is closed
/// exactly once, by the read source's cancel handler: libdispatch must not see it closed before
/// the source's cancellation finished.
final class AcquiredSocket: @unchecked Sendable {
    enum Kind: Sendable {
        case write, notify

        /// The property that tells whether it is acquired.
        var property: String { self == .write ? "WriteAcquired" : "NotifyAcquired" }
    }

    enum Received {
        case datagram([UInt8])
        /// Nothing to read right now.
        case again
        /// A read of 0 bytes (an empty datagram or end of file) or a read error.
        case nothing
    }

    let kind: Kind
    let characteristic: ObjectPath
    /// The link it was acquired on (`DeviceState.Link.connected(generation:)`).
    let generation: Int
    /// The `AcquireNotify` caller, whose notify session it holds; nil for `AcquireWrite`.
    let owner: String?
    /// The call waiting for the GATT client to be ready (`sock_io.msg`).
    var pending: DBusMethodInvocation?
    private var descriptor: Int32 = -1
    private var source: DescriptorReadiness?
    private var suspended = false
    private(set) var isClosed = false

    init(kind: Kind, characteristic: ObjectPath, generation: Int, owner: String?) {
        self.kind = kind
        self.characteristic = characteristic
        self.generation = generation
        self.owner = owner
    }

    /// Whether the socket was made (`sock_io.io` set); stays true once closed.
    var isOpened: Bool { source != nil }
    /// Whether datagrams from the caller are still read.
    var isReading: Bool { source != nil && !suspended && !isClosed }

    /// Takes `fd` (bluetoothd's end) and starts watching it on `queue`.
    func open(_ fd: Int32, queue: DispatchQueue, onReadable: @escaping @Sendable () -> Void) {
        descriptor = fd
        source = DescriptorReadiness.repeating(fd, .readable, queue: queue, handler: onReadable) {
            SystemCall.close(fd)
        }
    }

    /// Reads one datagram (at most 512 bytes, as `sock_read`).
    func receive() -> Received {
        guard descriptor >= 0, !isClosed else { return .nothing }
        var buffer = [UInt8](repeating: 0, count: 512)
        switch buffer.withUnsafeMutableBytes({ SystemCall.receive(descriptor, into: $0, flags: Int32(MSG_DONTWAIT)) }) {
        case .success(let count) where count > 0: return .datagram(Array(buffer[..<count]))
        case .failure(let error) where error.isWouldBlock: return .again
        case .success, .failure: return .nothing
        }
    }

    /// Sends one datagram without blocking; false when it was dropped.
    func send(_ bytes: [UInt8]) -> Bool {
        guard descriptor >= 0, !isClosed else { return false }
        let sent = bytes.withUnsafeBytes {
            SystemCall.send(descriptor, $0, flags: Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
        }
        return (try? sent.get()) == bytes.count
    }

    /// Whether the caller's end is gone (`G_IO_HUP`, `G_IO_ERR` or `G_IO_NVAL`).
    var hasHungUp: Bool {
        guard descriptor >= 0, !isClosed else { return true }
        guard case .success(let revents) = SystemCall.poll(descriptor, events: 0, timeout: 0) else { return false }
        return revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0
    }

    /// Stops watching for datagrams (the socket stays open).
    func stopReading() {
        guard let source, !suspended, !isClosed else { return }
        suspended = true
        source.setEnabled(false)
    }

    /// Closes bluetoothd's end (idempotent): the caller reads end of file at once; the descriptor
    /// itself is closed by the watch's `cancelled`.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        guard let source else { return }
        SystemCall.shutdown(descriptor, Int32(SHUT_RDWR))
        source.cancel()
        suspended = false
    }

    deinit { close() }
}
