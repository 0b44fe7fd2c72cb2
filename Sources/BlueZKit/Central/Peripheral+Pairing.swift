public import Foundation

/// Pairing state, which Linux apps see where Core Bluetooth keeps it hidden.
extension Peripheral {
    /// Whether bluetoothd has paired with the peripheral (`Device1.Paired`); false when unknown.
    ///
    /// Pairing happens by itself when a characteristic needs encryption and bluetoothd's default
    /// agent accepts it (the desktop's, or the manager's with
    /// ``CentralManagerOptions/requestsDefaultPairingAgent``). Must not
    /// be called on the manager's D-Bus queue (it is not the delegate queue).
    public var isPaired: Bool { engine?.pairing(of: self).paired ?? false }

    /// Whether the pairing was kept as a bond, so it survives disconnections and restarts
    /// (`Device1.Bonded` where bluetoothd reports it, else `Paired`); false when unknown.
    public var isBonded: Bool { engine?.pairing(of: self).bonded ?? false }
}

extension CentralManager {
    /// Forgets `peripheral`'s pairing and everything bluetoothd knows about it
    /// (`Adapter1.RemoveDevice`, which also disconnects it); a pending or established
    /// connection of this manager ends first, as with ``cancelPeripheralConnection(_:)``.
    ///
    /// BlueZ has no unpair call that keeps the device: it is found again by the next scan.
    /// - Throws: ``BluetoothError`` with the BlueZ error when bluetoothd refuses.
    public func unpair(_ peripheral: Peripheral) async throws(BluetoothError) {
        guard let engine = shared.withLock({ $0.engine }) else {
            throw BluetoothError(.bluetoothUnavailable, message: "the manager has no connection to bluetoothd")
        }
        cancelPeripheralConnection(peripheral)
        try await engine.removeDevice(peripheral)
    }

    /// Linux: the peripherals bluetoothd knows on this manager's adapter — seen lately, paired,
    /// or connected by any process (`Device1` objects of the adapter).
    ///
    /// bluetoothd forgets an unpaired device some time after it was last seen
    /// (`TemporaryTimeout`, 30 s by default), so this is the short memory of a scan plus every
    /// pairing. Must not be called on the manager's D-Bus queue.
    public func retrieveKnownPeripherals() -> [Peripheral] {
        shared.withLock { $0.engine }?.retrieveKnownPeripherals(bondedOnly: false) ?? []
    }

    /// Linux: the peripherals bluetoothd keeps a bond with on this manager's adapter: their keys
    /// are stored, so the pairing survives disconnections and restarts (``Peripheral/isBonded``).
    /// Must not be called on the manager's D-Bus queue.
    public func retrieveBondedPeripherals() -> [Peripheral] {
        shared.withLock { $0.engine }?.retrieveKnownPeripherals(bondedOnly: true) ?? []
    }

    /// Linux: forgets the bond with the peripheral that has `identifier`, and everything
    /// bluetoothd knows about it, as ``unpair(_:)`` does.
    ///
    /// - Throws: ``BluetoothError`` `unknownDevice` when bluetoothd knows no such peripheral on
    ///   this manager's adapter; the BlueZ error when bluetoothd refuses.
    public func removeBond(withIdentifier identifier: UUID) async throws(BluetoothError) {
        guard let peripheral = retrievePeripherals(withIdentifiers: [identifier]).first else {
            throw BluetoothError(
                .unknownDevice, message: "bluetoothd knows no peripheral with identifier \(identifier)")
        }
        try await unpair(peripheral)
    }
}
