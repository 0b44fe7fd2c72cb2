/// Connecting to a peripheral by its address: a Linux addition.
extension CentralManager {
    /// Linux: connects to the peripheral with Bluetooth address `address`, whether or not
    /// bluetoothd has seen it (no scan first), and returns it once connected. Core Bluetooth has
    /// none: it hides addresses.
    ///
    /// Calls `Adapter1.ConnectDevice({Address, AddressType})` on the manager's connection, an
    /// experimental method of bluetoothd: it exists only when bluetoothd runs with
    /// `--experimental` (`-E`) or `Experimental = true` in `main.conf`. bluetoothd creates the
    /// device, connects it and resolves its services as after ``connect(_:options:)``; the
    /// peripheral is then this manager's like any other: the delegate gets `didConnect` (before
    /// this returns), ``cancelPeripheralConnection(_:)`` ends the link, and with a restore
    /// identifier it is saved and restored as a peripheral connected with
    /// ``connect(_:options:)`` (its request resumes with `Device1.Connect`).
    ///
    /// Unlike ``connect(_:options:)`` this is one attempt: it fails when the kernel gives up
    /// (an LE connection attempt ends after about 20 s without an answer from the device). When
    /// this manager has a request for the device already, pending or connected, no call is made
    /// and this waits for that request's `didConnect`. bluetoothd 5.68 and older refuse
    /// `ConnectDevice` for a device they know already (seen in a scan): then this makes one
    /// `Device1.Connect`. Cancelling the task throws `CancellationError` at once and ends the
    /// link, as ``cancelPeripheralConnection(_:)`` does (also a joined request's); a link that
    /// comes up after that is disconnected.
    ///
    /// - Parameters:
    ///   - address: `AA:BB:CC:DD:EE:FF`, either case.
    ///   - type: ``BluetoothAddressType/public`` or ``BluetoothAddressType/random`` (static or
    ///     private); a wrong type reaches no device.
    /// - Throws: ``BluetoothError``: `experimentalAPIUnavailable` when bluetoothd runs without
    ///   `--experimental`; `invalidParameters` for an address that is not one;
    ///   `connectionFailed` when the device did not answer; `bluetoothUnavailable` unless the
    ///   state is `.poweredOn`; `peripheralDisconnected` when the link ended before `didConnect`
    ///   reached the delegate queue; the BlueZ error in ``BluetoothError/underlying``.
    ///   `CancellationError`.
    public func connect(toAddress address: String, type: BluetoothAddressType) async throws -> Peripheral {
        guard state == .poweredOn, let engine = shared.withLock({ $0.engine }) else {
            throw BluetoothError(.bluetoothUnavailable, message: "the state is \(state), not poweredOn")
        }
        guard Self.isBluetoothAddress(address) else {
            throw BluetoothError(
                .invalidParameters, message: "'\(address)' is not a Bluetooth address (AA:BB:CC:DD:EE:FF)")
        }
        guard let outcome = await engine.connect(toAddress: address.uppercased(), random: type == .random) else {
            throw CancellationError()
        }
        let peripheral: Peripheral
        switch outcome {
        case .success(let linked): peripheral = linked
        case .failure(let error):
            if error.code == .operationCancelled, Task.isCancelled { throw CancellationError() }
            throw error
        }
        saveStateSoon()
        // Returns once the delegate queue has applied the link (`state` reads `.connected`).
        let id = waiters.makeID()
        defer { waiters.endWait(id: id) }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard waiters.waitForConnection(of: peripheral, id: id, continuation) else { return }
                switch peripheral.state {
                case .connected: waiters.linkChanged(peripheral, .connected)
                case .disconnected:
                    let ended = BluetoothError(.peripheralDisconnected, message: "the link ended as it was made")
                    waiters.linkChanged(peripheral, .disconnected(ended))
                case .connecting, .disconnecting: break
                }
            }
        } onCancel: {
            waiters.cancel(id: id)
            // Connected, but the caller gave up before it heard: as `connect(to:options:)`.
            cancelPeripheralConnection(peripheral)
        }
        return peripheral
    }

    /// Whether `text` is six two-digit hexadecimal numbers separated by colons.
    static func isBluetoothAddress(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }
}
