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
        gatt[id] = nil
        pendingServiceDiscoveries[id] = nil
        restoredSubscriptions[id] = nil
        forgotten = forgotten.filter { $0.value.peripheral != nil }
        forgotten[id] = ForgottenPeripheral(peripheral: peripheral)
    }
}
