public import Foundation

/// Async/await beside the delegates, on the same events: each call returns when the event the
/// delegate would get arrives (after the delegate was called, on the manager's queue).
extension CentralManager {
    /// How many values an async stream (``discoveries()``, ``Peripheral/notifications(of:)``)
    /// keeps for a consumer that falls behind: the newest 256; older ones are dropped.
    static let streamBufferLimit = 256

    /// Connects to `peripheral` and returns once connected; the request never times out.
    ///
    /// The same request as ``connect(_:options:)`` (the delegate's `didConnect` is called too).
    /// Cancelling the task cancels the request (``cancelPeripheralConnection(_:)``) and throws
    /// `CancellationError`; in a task that is cancelled already it throws at once, and no
    /// request goes out.
    ///
    /// - Throws: ``BluetoothError`` when the request fails for good (`didFailToConnect`), or is
    ///   cancelled by ``cancelPeripheralConnection(_:)`` (`operationCancelled`); `CancellationError`.
    public func connect(to peripheral: Peripheral, options: [String: Any]? = nil) async throws {
        guard state == .poweredOn else {
            throw BluetoothError(.bluetoothUnavailable, message: "the state is \(state), not poweredOn")
        }
        let id = waiters.makeID()
        defer { waiters.endWait(id: id) }
        nonisolated(unsafe) let options = options
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // Refused in a task cancelled already: it throws, and no request goes out.
                guard waiters.waitForConnection(of: peripheral, id: id, continuation) else { return }
                if peripheral.state == .connected {
                    return waiters.linkChanged(peripheral, .connected)
                }
                connect(peripheral, options: options)
                // A cancel since the waiter was registered may have cancelled before this
                // request went out: cancel it after it (the task's flag is set before `onCancel`).
                if Task.isCancelled { cancelPeripheralConnection(peripheral) }
            }
        } onCancel: {
            waiters.cancel(id: id)
            cancelPeripheralConnection(peripheral)
        }
    }

    /// Disconnects `peripheral` (or cancels its pending connection) and returns once it is
    /// disconnected; returns at once when it is not connected.
    ///
    /// The same call as ``cancelPeripheralConnection(_:)`` (the delegate's `didDisconnectPeripheral`
    /// is called too, first). bluetoothd takes the link down when no other program uses it.
    /// Cancelling the task stops the wait, not the disconnection.
    /// - Throws: `CancellationError` only.
    public func disconnect(from peripheral: Peripheral) async throws {
        let id = waiters.makeID()
        defer { waiters.endWait(id: id) }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                waiters.waitForDisconnection(of: peripheral, id: id, continuation)
                if peripheral.state == .disconnected { return waiters.alreadyDisconnected(peripheral) }
                cancelPeripheralConnection(peripheral)
            }
        } onCancel: {
            waiters.cancel(id: id)
        }
    }
}

/// A peripheral's async calls throw ``BluetoothError`` `notConnected` when its central manager is
/// released while they wait (or before they start).
extension Peripheral {
    /// Discovers services (all when `uuids` is nil) and returns them.
    ///
    /// The same call as ``discoverServices(_:)``; the delegate's `didDiscoverServices` is called too.
    /// - Throws: the error that call reports (e.g. ``BluetoothError`` `notConnected`); `CancellationError`.
    public func discoverServices(matching uuids: [BluetoothUUID]?) async throws -> [Service] {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForServices(of: self, id: id, continuation)
        } then: {
            discoverServices(uuids)
        }
    }

    /// Discovers characteristics of `service` (all when `uuids` is nil) and returns them.
    ///
    /// The same call as ``discoverCharacteristics(_:for:)``.
    public func discoverCharacteristics(matching uuids: [BluetoothUUID]?, in service: Service) async throws
        -> [Characteristic]
    {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForCharacteristics(of: service, id: id, continuation)
        } then: {
            discoverCharacteristics(uuids, for: service)
        }
    }

    /// Discovers the services `service` includes (all when `uuids` is nil) and returns them.
    ///
    /// The same call as ``discoverIncludedServices(_:for:)`` (the delegate's
    /// `didDiscoverIncludedServicesFor` is called too).
    /// - Throws: the error that call reports (e.g. ``BluetoothError`` `notConnected`); `CancellationError`.
    public func discoverIncludedServices(matching uuids: [BluetoothUUID]?, in service: Service) async throws
        -> [Service]
    {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForIncludedServices(of: service, id: id, continuation)
        } then: {
            discoverIncludedServices(uuids, for: service)
        }
    }

    /// Discovers the descriptors of `characteristic` and returns them.
    ///
    /// The same call as ``discoverDescriptors(for:)`` (the delegate's
    /// `didDiscoverDescriptorsFor` is called too).
    /// - Throws: the error that call reports (e.g. ``BluetoothError`` `notConnected`); `CancellationError`.
    public func discoverDescriptors(of characteristic: Characteristic) async throws -> [Descriptor] {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForDescriptors(of: characteristic, id: id, continuation)
        } then: {
            discoverDescriptors(for: characteristic)
        }
    }

    /// Reads `characteristic` and returns its value.
    ///
    /// The same call as ``readValue(for:)-(Characteristic)``. As with Core Bluetooth, a
    /// notification of the characteristic that arrives while the read is under way answers it.
    /// - Throws: ``ATTError`` for an ATT failure, ``BluetoothError`` (`notConnected`, …); `CancellationError`.
    public func readValue(of characteristic: Characteristic) async throws -> Data {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForRead(of: characteristic, id: id, continuation)
        } then: {
            readValue(for: characteristic)
        }
    }

    /// Writes `data` to `characteristic` with response and returns once the peripheral accepted it.
    ///
    /// The same call as ``writeValue(_:for:type:)`` with `.withResponse` (the delegate's
    /// `didWriteValueFor` is called too); writes reach bluetoothd in the order they were made,
    /// and each call returns with its own write's result. Cancelling the task stops the wait,
    /// not the write.
    /// - Throws: ``ATTError`` when the peripheral refuses it, ``BluetoothError`` (`notConnected`,
    ///   …); `CancellationError`.
    public func writeValue(_ data: Data, to characteristic: Characteristic) async throws {
        try await writeWithResponse { engine, request in
            engine.write(self, data: data, characteristic: characteristic, withResponse: true, request: request)
        }
    }

    /// Writes `data` to `descriptor` and returns once the peripheral accepted it.
    ///
    /// The same call as ``writeValue(_:for:)-(_,Descriptor)``; as ``writeValue(_:to:)-(_,Characteristic)``.
    public func writeValue(_ data: Data, to descriptor: Descriptor) async throws {
        try await writeWithResponse { engine, request in
            engine.write(self, data: data, descriptor: descriptor, request: request)
        }
    }

    /// Reads `descriptor` and returns its value.
    ///
    /// The same call as ``readValue(for:)-(Descriptor)``.
    /// - Throws: ``ATTError`` for an ATT failure, ``BluetoothError`` (`notConnected`, …); `CancellationError`.
    public func readValue(of descriptor: Descriptor) async throws -> Data {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForRead(of: descriptor, id: id, continuation)
        } then: {
            readValue(for: descriptor)
        }
    }

    /// The peripheral's signal strength as ``readRSSI()`` reports it (the last advertisement's).
    ///
    /// - Throws: ``BluetoothError`` `operationNotSupported` when bluetoothd has none for it now;
    ///   `CancellationError`.
    public func currentRSSI() async throws -> Int {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForRSSI(of: self, id: id, continuation)
        } then: {
            readRSSI()
        }
    }

    /// Writes `data` to `characteristic` without response, and returns once more writes can go
    /// at once: the async form of ``canSendWriteWithoutResponse`` and
    /// ``PeripheralDelegate/peripheralIsReady(toSendWriteWithoutResponse:)``.
    ///
    /// The same call as ``writeValue(_:for:type:)`` with `.withoutResponse`: the write is queued
    /// and never dropped, and leaves in order with the others. A loop of these calls sends as
    /// fast as the link takes the data, with at most the queue's worth in memory. Cancelling the
    /// task stops the wait, not the write.
    /// - Throws: ``BluetoothError`` `notConnected` when the peripheral is not connected (nothing is
    ///   sent) or the link is lost while the task waits; `CancellationError`.
    public func writeValueWithoutResponse(_ data: Data, to characteristic: Characteristic) async throws {
        let waiters = try asyncWaiters()
        guard let engine else { throw BluetoothError(.notConnected, message: "the central manager is gone") }
        let id = waiters.makeID()
        defer { waiters.endWait(id: id) }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                engine.busQueue.async {
                    guard self.state == .connected else {
                        let error = BluetoothError(.notConnected, message: "the peripheral is not connected")
                        return continuation.resume(throwing: error)
                    }
                    engine.write(self, data: data, characteristic: characteristic, withResponse: false)
                    // Updated on this queue by the write: a wait that starts here sees its end.
                    if self.canSendWriteWithoutResponse { return continuation.resume() }
                    waiters.waitForWriteRoom(of: self, id: id, continuation)
                }
            }
        } onCancel: {
            waiters.cancel(id: id)
        }
    }

    /// Registers the write's waiter on the bus queue right before `write` queues it as the request
    /// the waiter's ID names: its result comes back with that ID and reaches this call alone.
    private func writeWithResponse(_ write: @escaping @Sendable (CentralEngine, UInt64) -> Void) async throws {
        let waiters = try asyncWaiters()
        guard let engine else { throw BluetoothError(.notConnected, message: "the central manager is gone") }
        let id = waiters.makeID()
        defer { waiters.endWait(id: id) }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                engine.busQueue.async {
                    waiters.writeStarts(id: id, continuation)
                    write(engine, id)
                }
            }
        } onCancel: {
            waiters.cancel(id: id)
        }
    }

    /// Subscribes to `characteristic`'s notifications or indications (`enabled` true) or ends the
    /// subscription, and returns once the peripheral took the change.
    ///
    /// The same call as ``setNotifyValue(_:for:)`` (`GattCharacteristic1.AcquireNotify` or
    /// `StartNotify`; `StopNotify`, or closing the notify socket); it returns with the
    /// characteristic's next ``PeripheralDelegate/peripheral(_:didUpdateNotificationStateFor:error:)``,
    /// after the delegate heard it, so ``Characteristic/isNotifying`` says the new state. The
    /// values come to the delegate and to ``notifications(of:)``. Cancelling the task stops the
    /// wait, not the change.
    /// - Throws: ``ATTError`` when the peripheral refuses the change (its CCC descriptor's
    ///   write), ``BluetoothError`` (`notConnected`, or the link's error when the link ends
    ///   meanwhile); `CancellationError`.
    public func setNotifyValue(_ enabled: Bool, of characteristic: Characteristic) async throws {
        try await asyncWaiters().wait { waiters, id, continuation in
            waiters.waitForNotifyState(of: characteristic, peripheral: self, id: id, continuation)
        } then: {
            setNotifyValue(enabled, for: characteristic)
        }
    }

    /// The values `characteristic` notifies or indicates, from now on.
    ///
    /// Subscribes (``setNotifyValue(_:for:)`` true) when the stream starts and unsubscribes when
    /// the last stream of the characteristic ends (its consumer stops or is cancelled). The
    /// stream finishes with an error when the subscription fails, the link is lost or the
    /// central manager is released (``BluetoothError`` `notConnected`). It keeps
    /// the newest 256 values its consumer has not taken yet and drops older ones (the delegate
    /// still sees every value), so a consumer that falls behind costs bounded memory.
    public func notifications(of characteristic: Characteristic) -> AsyncThrowingStream<Data, any Error> {
        AsyncThrowingStream(bufferingPolicy: .bufferingNewest(CentralManager.streamBufferLimit)) { continuation in
            guard let waiters = try? asyncWaiters() else {
                return continuation.finish(throwing: BluetoothError(.notConnected, message: "the manager is gone"))
            }
            let id = waiters.makeID()
            waiters.addStream(of: characteristic, peripheral: self, id: id, continuation)
            continuation.onTermination = { [weak self] _ in
                guard let self, !waiters.removeStream(of: characteristic, id: id), self.state == .connected else {
                    return
                }
                self.setNotifyValue(false, for: characteristic)
            }
            if !characteristic.isNotifying { setNotifyValue(true, for: characteristic) }
        }
    }

    private func asyncWaiters() throws(BluetoothError) -> AsyncWaiters {
        guard let manager = engine?.manager else {
            throw BluetoothError(.notConnected, message: "the central manager of this peripheral is gone")
        }
        return manager.waiters
    }
}
