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

    /// Linux: whether bluetoothd trusts the peripheral (`Device1.Trusted`): a trusted device's
    /// profile connections need no agent's authorization; false when unknown. Must not be
    /// called on the manager's D-Bus queue.
    public var isTrusted: Bool { engine?.isTrusted(self) ?? false }

    /// Linux: pairs with the peripheral now, bonding (`Device1.Pair`), rather than when a
    /// characteristic first needs encryption; returns once paired. Core Bluetooth has none.
    ///
    /// `Pair` goes out on the manager's own connection to bluetoothd, so the manager's agent
    /// decides how it is authenticated when the manager has one registered
    /// (``CentralManagerOptions/requestsDefaultPairingAgent``): its ``PairingAgentDelegate`` is
    /// asked on the manager's queue for passkeys and comparisons, and without a delegate it pairs
    /// just works. Without a registered agent bluetoothd asks its default agent (another
    /// program's), or pairs just works when there is none. A peripheral that is not connected
    /// is connected by bluetoothd for the pairing (that link is bluetoothd's: no `didConnect`).
    /// A peripheral bonded already (``isBonded``) is success, with nothing sent to bluetoothd.
    ///
    /// Cancelling the task sends `Device1.CancelPairing` and throws
    /// ``BluetoothError/Code/operationCancelled`` at once.
    /// - Throws: ``BluetoothError``: `pairingFailed` (a passkey or comparison did not match, an
    ///   agent or the peripheral refused, the link ended), `encryptionTimedOut`,
    ///   `connectionFailed` (bluetoothd could not reach it), `inProgress` (a pairing or
    ///   connection of it is under way), `unknownDevice`, `bluetoothUnavailable`,
    ///   `operationCancelled`; the BlueZ error in ``BluetoothError/underlying``.
    public func pair() async throws(BluetoothError) {
        guard let engine else {
            throw BluetoothError(.bluetoothUnavailable, message: "the peripheral's central manager was released")
        }
        try await engine.pair(self)
    }

    /// Linux: trusts the peripheral or stops trusting it (sets `Device1.Trusted`); returns once
    /// bluetoothd took it, when ``isTrusted`` reads the new value. Core Bluetooth has none.
    ///
    /// bluetoothd keeps the setting with the device (for a bonded one, across restarts).
    /// - Throws: ``BluetoothError``: `unknownDevice` when bluetoothd no longer knows the
    ///   peripheral, `accessDenied`, `bluetoothUnavailable`, `operationCancelled` when the task
    ///   was cancelled (the setting may still be made); the BlueZ error in
    ///   ``BluetoothError/underlying``.
    public func setTrusted(_ trusted: Bool) async throws(BluetoothError) {
        guard let engine else {
            throw BluetoothError(.bluetoothUnavailable, message: "the peripheral's central manager was released")
        }
        try await engine.setTrusted(self, trusted)
    }
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
