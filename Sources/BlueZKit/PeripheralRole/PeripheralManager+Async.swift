/// Async/await beside the delegate: each call returns when the event the delegate gets arrives
/// (after the delegate was called, on the manager's queue).
extension PeripheralManager {
    /// Publishes `service` and returns once bluetoothd registered it.
    ///
    /// The same call as ``add(_:)`` (the delegate's `didAdd` is called too, first). Cancelling
    /// the task does not stop the registration.
    /// - Throws: the error `didAdd` reports (``BluetoothError``: `invalidParameters` for a service
    ///   BlueZ cannot publish, `bluetoothUnavailable`, …).
    public func addService(_ service: MutableService) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            publish(service) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Starts advertising `data` and returns once bluetoothd took the advertisement.
    ///
    /// The same call as ``startAdvertising(_:)-(AdvertisementData)`` (the delegate's
    /// `peripheralManagerDidStartAdvertising` is called too, first). Cancelling the task does not
    /// stop it: call ``stopAdvertising()``.
    /// - Throws: the error the delegate gets (``BluetoothError``: `alreadyAdvertising`,
    ///   `advertisingDataTooLarge`, …).
    public func startAdvertising(with data: AdvertisementData) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            startAdvertising(data) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Linux: the machine's Bluetooth adapters, as for ``CentralManager/adapters``; the one this
    /// manager uses has ``BluetoothAdapter/isInUse``. Empty while bluetoothd is away.
    public var adapters: [BluetoothAdapter] {
        engine.run { engine.sync { $0.client }?.adapters.map(BluetoothAdapter.init) ?? [] }
    }
}
