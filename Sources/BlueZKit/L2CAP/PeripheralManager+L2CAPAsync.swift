/// Async/await for L2CAP channels in the peripheral role, beside the delegate (which gets every
/// event first, on the manager's queue).
extension PeripheralManager {
    /// Publishes an L2CAP channel and returns its PSM.
    ///
    /// The same call as ``publishL2CAPChannel(withEncryption:)`` (the delegate's
    /// `didPublishL2CAPChannel` is called too, first); channels that centrals open to it come to
    /// ``l2capChannels()`` and to the delegate's `didOpen`. Cancelling the task does not stop it:
    /// call ``unpublishL2CAPChannel(_:)``.
    /// - Throws: the ``BluetoothError`` the delegate gets (`bluetoothUnavailable` unless powered
    ///   on, `operationNotSupported` without kernel Bluetooth sockets, …).
    public func publishL2CAPChannel(requiringEncryption encryptionRequired: Bool) async throws -> L2CAPPSM {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<L2CAPPSM, any Error>) in
            publishL2CAPChannel(encryptionRequired) { psm, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: psm) }
            }
        }
    }

    /// Stops accepting channels on `PSM` and returns once the kernel stopped listening.
    ///
    /// The same call as ``unpublishL2CAPChannel(_:)`` (the delegate's `didUnpublishL2CAPChannel`
    /// is called too, first). Channels already open stay open.
    /// - Throws: ``BluetoothError`` `invalidParameters` when this manager has no channel on `PSM`.
    public func unpublishL2CAPChannel(psm PSM: L2CAPPSM) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            unpublishL2CAPChannel(PSM) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Linux: the channels centrals open to this manager's published PSMs, from now on, beside
    /// the delegate's ``PeripheralManagerDelegate/peripheralManager(_:didOpen:error:)``.
    ///
    /// Each channel comes once to every stream open when it opened, after the delegate heard of
    /// it; a channel nobody keeps is closed when released. A consumer that falls behind keeps the
    /// newest 16 (older ones are released, and so closed). The stream finishes when the manager
    /// is released.
    public func l2capChannels() -> AsyncStream<L2CAPChannel> {
        AsyncStream(bufferingPolicy: .bufferingNewest(16)) { continuation in
            let key = l2cap.addStream(continuation)
            continuation.onTermination = { [weak l2cap] _ in l2cap?.removeStream(key) }
        }
    }
}
