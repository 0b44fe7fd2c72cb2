import BlueZ

/// Bounded memory under long scans: what bluetoothd forgets, the engine forgets too.
///
/// bluetoothd removes a device it discovered when nothing uses it (after `TemporaryTimeout`,
/// 30 s by default), and phones rotate their private address every ~15 minutes, so a gateway
/// in a busy place sees an endless stream of new devices. When bluetoothd removes one, the
/// engine drops its ``Peripheral`` and what it knew of it, unless a connection request for it
/// is pending (it looks for the device again). A peripheral the app still holds is kept
/// weakly: if the device comes back, the app's object is the one reported again; once the app
/// lets it go, nothing of it remains.
extension CentralEngine {
    /// A peripheral of a device bluetoothd removed, kept only as long as the app holds it.
    struct ForgottenPeripheral {
        weak var peripheral: Peripheral?
    }

    /// Drops the peripheral of a device bluetoothd removed (on the queue).
    func forget(_ id: DeviceID) {
        guard links[id] == nil, let peripheral = peripherals.removeValue(forKey: id) else { return }
        knownNames[id] = nil
        gatt.removeValue(forKey: id)?.endNotifyRoutes()
        pendingServiceDiscoveries[id] = nil
        restoredSubscriptions[id] = nil
        // Entries whose peripheral the app released are dropped in one pass once the table has
        // doubled since the last: constant time per device on average, and never more than twice
        // the peripherals the app holds (or 64).
        if forgotten.count >= forgottenPruneAt {
            forgotten = forgotten.filter { $0.value.peripheral != nil }
            forgottenPruneAt = Swift.max(Self.forgottenPruneMinimum, 2 * forgotten.count)
        }
        forgotten[id] = ForgottenPeripheral(peripheral: peripheral)
    }

    /// Knows `peripheral` again when its device object went before a request for it arrived:
    /// out of the forgotten table, among the engine's peripherals. On the queue.
    func adopt(_ peripheral: Peripheral) {
        let id = peripheral.deviceID
        guard peripherals[id] == nil else { return }
        forgotten[id] = nil
        peripherals[id] = peripheral
    }

    /// The size below which the forgotten table is never pruned.
    static let forgottenPruneMinimum = 64
}
