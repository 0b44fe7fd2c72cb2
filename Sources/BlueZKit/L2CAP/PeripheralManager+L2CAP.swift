import BlueZ
import Foundation
import Locking

/// L2CAP channels in the peripheral role.
extension PeripheralManager {
    /// Publishes an LE credit-based L2CAP channel on a PSM the kernel picks, as Core Bluetooth's
    /// `publishL2CAPChannel(withEncryption:)`; the PSM goes to
    /// ``PeripheralManagerDelegate/peripheralManager(_:didPublishL2CAPChannel:error:)`` on the
    /// manager's queue, and each channel a central opens to it to
    /// ``PeripheralManagerDelegate/peripheralManager(_:didOpen:error:)``, on the same queue.
    ///
    /// As with Core Bluetooth, centrals learn the PSM from you: put it in a readable
    /// characteristic of type ``CBUUIDL2CAPPSMCharacteristicString`` (two bytes, little endian).
    ///
    /// The Linux kernel listens beside bluetoothd: an `AF_BLUETOOTH`/`BTPROTO_L2CAP`
    /// `SOCK_SEQPACKET` socket bound to the manager's adapter with PSM 0 (the kernel assigns a
    /// dynamic PSM in 0x0080…0x00FF, read back with `getsockname`) and `BT_SECURITY` medium when
    /// `encryptionRequired` (the kernel then makes the central encrypt the link first), low
    /// otherwise. The listening socket survives bluetoothd restarts; it is closed by
    /// ``unpublishL2CAPChannel(_:)`` or when the manager is released.
    ///
    /// The error is a ``BluetoothError``: `bluetoothUnavailable` unless the manager is
    /// ``ManagerState/poweredOn``, `operationNotSupported` when the kernel has no Bluetooth
    /// sockets, or another kernel error (the `errno` is in ``BluetoothError/underlying``); the
    /// PSM reported with an error is 0.
    public func publishL2CAPChannel(withEncryption encryptionRequired: Bool) {
        publishL2CAPChannel(encryptionRequired, then: nil)
    }

    /// Publishes as ``publishL2CAPChannel(withEncryption:)``; `then` runs on `queue` right after
    /// the delegate's `didPublishL2CAPChannel`.
    func publishL2CAPChannel(
        _ encryptionRequired: Bool, then: (@Sendable (L2CAPPSM, BluetoothError?) -> Void)?
    ) {
        let report = { @Sendable (psm: L2CAPPSM, error: BluetoothError?) in
            self.post(.l2capPublished(psm, error, then: then))
        }
        guard state == .poweredOn else {
            return report(
                0, BluetoothError(.bluetoothUnavailable, message: "The peripheral manager is not powered on."))
        }
        let adapter = adapters.first(where: \.isInUse).map(\.address).flatMap { $0.isEmpty ? nil : $0 }
        let listener: BlueZL2CAPListener
        do {
            listener = try BlueZL2CAPListener(
                adapterAddress: adapter, security: encryptionRequired ? .medium : .low, queue: l2cap.queue)
        } catch {
            return report(0, BluetoothError(l2cap: error))
        }
        l2cap.add(listener)
        let psm = listener.psm
        // Published before any channel to it can be reported: both go through `queue`, in order.
        report(psm, nil)
        l2cap.queue.async {
            listener.accept { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let accepted):
                    // The same `Central` the GATT side reports: its MTU if a request told it.
                    let central = self.engine.central(address: accepted.peer.address, adapter: adapter ?? "")
                    let channel = L2CAPChannel(peer: central, psm: psm, socket: accepted.socket)
                    self.post(.l2capOpened(channel, nil))
                case .failure(let error):
                    let failure = BluetoothError(l2cap: error)
                    self.l2cap.remove(psm)
                    self.post(.l2capOpened(nil, failure))
                }
            }
        }
    }

    /// Stops accepting channels on `PSM`, as Core Bluetooth's `unpublishL2CAPChannel(_:)`;
    /// ``PeripheralManagerDelegate/peripheralManager(_:didUnpublishL2CAPChannel:error:)``
    /// follows on the manager's queue. Channels already open stay open.
    ///
    /// Shuts the kernel's listening socket down (`shutdown`), then reports. The error is a ``BluetoothError``
    /// `invalidParameters` when this manager has no channel published on `PSM`.
    public func unpublishL2CAPChannel(_ PSM: L2CAPPSM) {
        unpublishL2CAPChannel(PSM, then: nil)
    }

    /// Unpublishes as ``unpublishL2CAPChannel(_:)``; `then` runs on `queue` right after the
    /// delegate's `didUnpublishL2CAPChannel`.
    func unpublishL2CAPChannel(_ PSM: L2CAPPSM, then: (@Sendable (BluetoothError?) -> Void)?) {
        let report = { @Sendable (error: BluetoothError?) in
            self.post(.l2capUnpublished(PSM, error, then: then))
        }
        guard let listener = l2cap.remove(PSM) else {
            return report(
                BluetoothError(
                    .invalidParameters, message: "No L2CAP channel is published on PSM 0x\(String(PSM, radix: 16))."))
        }
        // Reported once the kernel stopped listening: a central that opens the PSM after the
        // delegate heard of it is refused, and no channel of it is reported afterwards.
        l2cap.queue.async {
            listener.close()
            report(nil)
        }
    }

    /// Linux: the PSMs this manager publishes now.
    public var publishedL2CAPChannels: [L2CAPPSM] { l2cap.psms }
}

/// The listening sockets of a manager's published channels, by PSM; closed when the manager goes.
///
/// `Sendable` as the compiler checks it: the tables are behind `PosixMutex`es, and each listener
/// checks that it is used on `queue` (its state is a `QueueBound`).
final class L2CAPPublications: Sendable {
    /// Where the listeners accept, and where their channels run.
    let queue = DispatchQueue(label: "bluezkit.l2cap.peripheral")
    private let listeners = PosixMutex([L2CAPPSM: BlueZL2CAPListener]())

    func add(_ listener: BlueZL2CAPListener) { listeners.withLock { $0[listener.psm] = listener } }

    @discardableResult
    func remove(_ psm: L2CAPPSM) -> BlueZL2CAPListener? { listeners.withLock { $0.removeValue(forKey: psm) } }

    var psms: [L2CAPPSM] { listeners.withLock { $0.keys.sorted() } }

    /// The consumers of ``PeripheralManager/l2capChannels()``, by stream.
    private let streams = PosixMutex((next: UInt64(0), open: [UInt64: AsyncStream<L2CAPChannel>.Continuation]()))

    /// Adds a consumer of opened channels; returns its key for ``removeStream(_:)``.
    func addStream(_ continuation: AsyncStream<L2CAPChannel>.Continuation) -> UInt64 {
        streams.withLock { streams in
            defer { streams.next += 1 }
            streams.open[streams.next] = continuation
            return streams.next
        }
    }

    func removeStream(_ key: UInt64) { _ = streams.withLock { $0.open.removeValue(forKey: key) } }

    /// A central opened `channel`: every stream gets it.
    func deliver(_ channel: L2CAPChannel) {
        for stream in streams.withLock({ Array($0.open.values) }) { stream.yield(channel) }
    }

    deinit {
        for stream in streams.withLock({ $0.open.values }) { stream.finish() }
        let all = listeners.withLock { $0.values }
        queue.async { for listener in all { listener.close() } }
    }
}

extension PeripheralManagerDelegate {
    /// Does nothing.
    public func peripheralManager(
        _ peripheral: PeripheralManager, didPublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?
    ) {}
    /// Does nothing.
    public func peripheralManager(
        _ peripheral: PeripheralManager, didUnpublishL2CAPChannel PSM: L2CAPPSM, error: (any Error)?
    ) {}
    /// Does nothing: the channel, if any, is released and so closed.
    public func peripheralManager(_ peripheral: PeripheralManager, didOpen channel: L2CAPChannel?, error: (any Error)?)
    {}
}
