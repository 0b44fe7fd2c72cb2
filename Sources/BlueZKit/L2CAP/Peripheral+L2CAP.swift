import BlueZ
import Foundation

/// L2CAP channels in the central role.
extension Peripheral {
    /// Opens an LE credit-based L2CAP channel to the peripheral's `PSM`, as Core Bluetooth's
    /// `openL2CAPChannel(_:)`; the outcome goes to
    /// ``PeripheralDelegate/peripheral(_:didOpen:error:)`` on the central manager's queue.
    ///
    /// The peripheral must be connected. The Linux kernel opens the channel on the existing LE
    /// link (an `AF_BLUETOOTH`/`BTPROTO_L2CAP` `SOCK_SEQPACKET` socket bound to the manager's
    /// adapter, connected to the peripheral's address, address type and PSM); bluetoothd is not
    /// involved. The channel asks for no security itself: when the peripheral published it with
    /// encryption, the kernel encrypts the link (pairing if needed) and retries.
    ///
    /// The error is a ``BluetoothError``: `notConnected` when the peripheral is not connected,
    /// `invalidParameters` for a PSM outside 0x0001…0x00FF, `connectionFailed` when the
    /// peripheral refuses (no channel published on the PSM; the kernel's `ECONNREFUSED` is in
    /// ``BluetoothError/underlying``), `connectionTimeout` when it does not answer.
    public func openL2CAPChannel(_ PSM: L2CAPPSM) {
        openChannel(PSM) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let channel): self.delegate?.peripheral(self, didOpen: channel, error: nil)
            case .failure(let error): self.delegate?.peripheral(self, didOpen: nil, error: error)
            }
        }
    }

    /// Linux: opens an L2CAP channel to `PSM` as ``openL2CAPChannel(_:)`` does, and returns it.
    ///
    /// The delegate's ``PeripheralDelegate/peripheral(_:didOpen:error:)`` is called too, first,
    /// on the manager's queue. Cancelling the task does not stop the kernel's attempt; a channel
    /// that opens after all is closed.
    /// - Throws: the error the delegate gets.
    public func openL2CAPChannel(psm PSM: L2CAPPSM) async throws(BluetoothError) -> L2CAPChannel {
        let result = await withCheckedContinuation { continuation in
            openChannel(PSM) { [weak self] result in
                if let self {
                    switch result {
                    case .success(let channel): self.delegate?.peripheral(self, didOpen: channel, error: nil)
                    case .failure(let error): self.delegate?.peripheral(self, didOpen: nil, error: error)
                    }
                }
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }

    /// Opens the channel and calls `completion` on the manager's queue.
    private func openChannel(
        _ PSM: L2CAPPSM, completion: @escaping @Sendable (Result<L2CAPChannel, BluetoothError>) -> Void
    ) {
        let manager = engine?.manager
        let queue = manager?.queue ?? .main
        let fail: @Sendable (BluetoothError) -> Void = { error in queue.async { completion(.failure(error)) } }
        guard let manager else {
            return fail(BluetoothError(.bluetoothUnavailable, message: "The peripheral's central manager is gone."))
        }
        guard state == .connected else { return fail(BluetoothError(.notConnected)) }
        guard let address else {
            return fail(BluetoothError(.unknownDevice, message: "bluetoothd gave no address for the peripheral."))
        }
        let adapter = manager.adapters.first(where: \.isInUse).map(\.address).flatMap { $0.isEmpty ? nil : $0 }
        let peer = BlueZL2CAPSocketAddress(
            address: address, type: addressType == .random ? .leRandom : .lePublic, psm: PSM)
        let channelQueue = DispatchQueue(label: "bluezkit.l2cap.central")
        BlueZL2CAPSocket.connect(from: adapter, to: peer, security: .low, queue: channelQueue) { [weak self] result in
            switch result {
            case .success(let socket):
                guard let self else { return socket.close() }
                let channel = L2CAPChannel(peer: self, psm: PSM, socket: socket)
                queue.async { completion(.success(channel)) }
            case .failure(let error):
                fail(BluetoothError(l2cap: error))
            }
        }
    }
}

extension PeripheralDelegate {
    /// Does nothing: the channel, if any, is released and so closed.
    public func peripheral(_ peripheral: Peripheral, didOpen channel: L2CAPChannel?, error: (any Error)?) {}
}
