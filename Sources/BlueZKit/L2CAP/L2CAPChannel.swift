import BlueZ
public import Foundation

/// An L2CAP protocol/service multiplexer value: the port number of an L2CAP channel, as Core
/// Bluetooth's `CBL2CAPPSM`.
///
/// Published channels get a dynamic PSM from the kernel, in LE's range 0x0080…0x00FF.
public typealias L2CAPPSM = UInt16

/// A remote device: a ``Peripheral`` (central role) or a ``Central`` (peripheral role), as Core
/// Bluetooth's `CBPeer`.
///
/// As `CBPeer` is an `NSObject`, a peer has ``CoreBluetoothObject``'s `isEqual(_:)`, `hash` and
/// `%@` formatting: `channel.peer.isEqual(peripheral)`.
public protocol Peer: AnyObject, Sendable, CoreBluetoothObject {
    /// The stable identifier of the remote device, as seen from this adapter.
    var identifier: UUID { get }
}

extension Peripheral: Peer {}
extension Central: Peer {}

/// An open LE credit-based L2CAP channel to a peer, as Core Bluetooth's `CBL2CAPChannel`.
///
/// A channel is a reliable, flow-controlled pipe beside GATT: the Linux kernel runs it
/// (`AF_BLUETOOTH`/`BTPROTO_L2CAP` `SOCK_SEQPACKET` socket) next to bluetoothd, which is not
/// involved. You get one from ``PeripheralDelegate/peripheral(_:didOpen:error:)`` (after
/// ``Peripheral/openL2CAPChannel(_:)``) or ``PeripheralManagerDelegate/peripheralManager(_:didOpen:error:)``
/// (a central opened a channel ``PeripheralManager/publishL2CAPChannel(withEncryption:)`` published).
///
/// Read and write it either with Core Bluetooth's Foundation streams (``inputStream``,
/// ``outputStream``) or with Swift concurrency (``read()``, ``write(_:)``) — one of the two for
/// each direction: both take from the same incoming data. The kernel keeps SDU boundaries:
/// ``read()`` returns one SDU; the streams are byte streams, as on Apple's platforms.
///
/// Keep a reference: as with Core Bluetooth, a channel that is released is closed. It is also
/// closed by ``close()`` or when both streams are closed.
///
/// The invariant behind `@unchecked Sendable`: every stored property is a constant, and the only
/// ones the compiler cannot check, the two streams (Foundation's `Stream` is not `Sendable`), keep
/// their own state behind a lock (`StreamEvents`) and the core's `QueueBound`.
public final class L2CAPChannel: @unchecked Sendable, CustomStringConvertible {
    /// The remote device: a ``Peripheral`` or a ``Central``.
    public let peer: any Peer
    /// The PSM of the channel: the one opened, or the one published.
    public let psm: L2CAPPSM
    /// Incoming data as a byte stream: schedule it in a run loop and open it, as with Core
    /// Bluetooth. `read(_:maxLength:)` waits until data arrives (0 once the peer closed the
    /// channel); delegate events (`hasBytesAvailable`, `endEncountered`, `errorOccurred`) arrive
    /// on the run loops it is scheduled in.
    public let inputStream: InputStream
    /// Outgoing data as a byte stream: each `write(_:maxLength:)` sends at most
    /// ``maximumWriteLength`` bytes as one SDU and never waits: it returns 0 (nothing written)
    /// while the peer withholds credits or the socket's buffer is full, and a `hasSpaceAvailable`
    /// event follows once the channel can take more. Apple's `CFWriteStreamWrite` waits instead;
    /// here a peer that never grants credits cannot hold the writing thread.
    public let outputStream: OutputStream
    /// Linux: the largest SDU the peer accepts (the kernel's `BT_SNDMTU`); ``write(_:)`` splits
    /// longer data into SDUs of this size.
    public var maximumWriteLength: Int { core.sendMTU }
    let core: L2CAPChannelCore

    init(peer: any Peer, psm: L2CAPPSM, socket: BlueZL2CAPSocket) {
        let core = L2CAPChannelCore(socket: socket)
        self.core = core
        self.peer = peer
        self.psm = psm
        let input = L2CAPInputStream(core: core)
        let output = L2CAPOutputStream(core: core)
        input.sibling = output
        output.sibling = input
        self.inputStream = input
        self.outputStream = output
        core.start()
    }

    deinit { core.close() }

    /// Linux: the next SDU the peer sent (or what the input stream left of it), waiting until
    /// one arrives; nil once the peer closed the channel and everything was read.
    ///
    /// Runs on the channel's own queue, never the manager's. The kernel keeps at most 64 KiB
    /// read ahead; beyond that it stops giving the peer credits.
    /// - Throws: ``BluetoothError``: `operationCancelled` when the task is cancelled (nothing is
    ///   lost), `notConnected` after ``close()``, or the error that ended the channel (such as
    ///   `peripheralDisconnected` when the link dropped).
    public func read() async throws(BluetoothError) -> Data? {
        let core = self.core
        let id = core.newID()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                core.queue.async { core.read(id: id, continuation: continuation) }
            }
        } onCancel: {
            core.queue.async { core.cancelRead(id: id) }
        }
        return try result.get()
    }

    /// Linux: sends `data` to the peer, as SDUs of at most ``maximumWriteLength`` bytes in order
    /// after earlier writes, and returns once the kernel took the last one (the kernel's
    /// credit-based flow control makes it wait while the peer is not reading).
    ///
    /// Cancelling the task does not stop the write; ``close()`` does.
    /// - Throws: ``BluetoothError``: `notConnected` after ``close()``, `peripheralDisconnected`
    ///   once the peer closed the channel, or the kernel's error (the `errno` is in
    ///   ``BluetoothError/underlying``).
    public func write(_ data: Data) async throws(BluetoothError) {
        let core = self.core
        let result = await withCheckedContinuation { continuation in
            core.queue.async { core.write(data, continuation: continuation) }
        }
        try result.get()
    }

    /// Linux: closes the channel (the kernel sends the peer an L2CAP disconnection request).
    /// Waiting reads and writes fail with `notConnected`; the streams end. Idempotent.
    public func close() { core.close() }

    /// The peer's identifier and the PSM.
    public var description: String {
        "L2CAPChannel(peer: \(peer.identifier.uuidString), psm: 0x\(String(psm, radix: 16)))"
    }
}

extension BluetoothError {
    /// The conversion of a kernel L2CAP socket error, keeping it as ``underlying``.
    init(l2cap error: BlueZSocketError) {
        let code: Code =
            switch error.code {
            case .invalidAddress, .invalidPSM, .messageTooLong: .invalidParameters
            case .closed: .peripheralDisconnected
            case .refused, .insufficientSecurity, .addressInUse: .connectionFailed
            case .timedOut: .connectionTimeout
            case .notConnected: .notConnected
            case .notSupported: .operationNotSupported
            case .permissionDenied: .accessDenied
            case .other: .unknown
            }
        self.init(code, message: "L2CAP: \(error)", underlying: error)
    }
}
