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
    ///   `advertisingDataTooLarge`, `operationCancelled` when ``stopAdvertising()`` was called
    ///   before bluetoothd took it, …).
    public func startAdvertising(with data: AdvertisementData) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            startAdvertising(data) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Unpublishes `service` and returns once bluetoothd no longer holds it.
    ///
    /// The same call as ``remove(_:)`` (`GattManager1.UnregisterApplication`; the services that
    /// include it are registered again without it), on the same chain as ``add(_:)`` and the
    /// other removals, so it returns after the changes made before it. Returns on the manager's
    /// queue's schedule. Cancelling the task does not stop the removal. Core Bluetooth reports
    /// no error for a removal, and neither does this: an unregistration bluetoothd refuses (or a
    /// bluetoothd that is away) leaves nothing registered on this manager's side.
    public func removeService(_ service: MutableService) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            unpublish(service) { continuation.resume() }
        }
    }

    /// Unpublishes every service and returns once bluetoothd no longer holds any of them.
    ///
    /// The same call as ``removeAllServices()`` (`GattManager1.UnregisterApplication` for each
    /// application), as ``removeService(_:)``.
    public func removeAllServicesAndWait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            unpublishAll { continuation.resume() }
        }
    }

    /// Stops advertising and returns once bluetoothd no longer holds the advertisement.
    ///
    /// The same call as ``stopAdvertising()`` (`LEAdvertisingManager1.UnregisterAdvertisement`).
    /// A ``startAdvertising(_:)-(AdvertisementData)`` still registering is stopped too: this
    /// returns after bluetoothd took that advertisement and gave it back, and after the
    /// delegate's `peripheralManagerDidStartAdvertising` got `operationCancelled` for it. Returns
    /// on the manager's queue's schedule; cancelling the task does not stop it. No error, as for
    /// ``stopAdvertising()``.
    public func stopAdvertisingAndWait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            stopAdvertising { continuation.resume() }
        }
    }

    /// Linux: the machine's Bluetooth adapters, as for ``CentralManager/adapters``; the one this
    /// manager uses has ``BluetoothAdapter/isInUse``. Empty while bluetoothd is away.
    public var adapters: [BluetoothAdapter] {
        engine.run { engine.sync { $0.client }?.adapters.map(BluetoothAdapter.init) ?? [] }
    }
}

/// Linux: a read or write request from a central, as ``PeripheralManager/requests()`` delivers it.
public enum PeripheralManagerRequest: Sendable {
    /// A read: set the request's ``ATTRequest/value`` and answer it with
    /// ``PeripheralManager/respond(to:withResult:)``, as for
    /// ``PeripheralManagerDelegate/peripheralManager(_:didReceiveRead:)``.
    case read(ATTRequest)
    /// Writes (one, or a central's queued writes): answer the first with
    /// ``PeripheralManager/respond(to:withResult:)``, as for
    /// ``PeripheralManagerDelegate/peripheralManager(_:didReceiveWrite:)``.
    case write([ATTRequest])
}

extension PeripheralManager {
    /// The open ``requests()`` streams.
    struct RequestStreams {
        var continuations: [UInt64: AsyncStream<PeripheralManagerRequest>.Continuation] = [:]
        var nextID: UInt64 = 0
    }

    /// Linux: the read and write requests of centrals, from now on, beside the delegate's
    /// `didReceiveRead` and `didReceiveWrite` (both get every request).
    ///
    /// Answer each request once, with ``respond(to:withResult:)``, from the delegate or from the
    /// stream's consumer: the first answer goes to bluetoothd and later ones are ignored. A request
    /// that nobody answers is answered with `unlikelyError` after 20 seconds, or at once when
    /// nothing holds it any more. Requests arrive in order, on the manager's queue's schedule; a
    /// consumer that falls behind keeps the newest 256 (the others are released, so answered
    /// `unlikelyError`, or were writes without response). While neither
    /// a delegate nor a stream is there, reads and writes are answered `requestNotSupported`.
    /// The stream finishes when the manager is released.
    public func requests() -> AsyncStream<PeripheralManagerRequest> {
        AsyncStream(bufferingPolicy: .bufferingNewest(256)) { continuation in
            let id = requestStreams.withLock { streams in
                defer { streams.nextID += 1 }
                streams.continuations[streams.nextID] = continuation
                return streams.nextID
            }
            continuation.onTermination = { [weak self] _ in
                _ = self?.requestStreams.withLock { $0.continuations.removeValue(forKey: id) }
            }
        }
    }

    /// Hands a request to the delegate and the streams (on `queue`); without either, answers it
    /// `requestNotSupported` unless bluetoothd answered it already.
    func deliver(_ request: PeripheralManagerRequest, answeredAlready: Bool) {
        let streams = requestStreams.withLock { Array($0.continuations.values) }
        let delegate = self.delegate
        switch request {
        case .read(let read):
            guard delegate != nil || !streams.isEmpty else {
                return respond(to: read, withResult: .requestNotSupported)
            }
            delegate?.peripheralManager(self, didReceiveRead: read)
        case .write(let writes):
            guard delegate != nil || !streams.isEmpty else {
                if !answeredAlready, let first = writes.first { respond(to: first, withResult: .requestNotSupported) }
                return
            }
            delegate?.peripheralManager(self, didReceiveWrite: writes)
        }
        for stream in streams { stream.yield(request) }
    }
}
