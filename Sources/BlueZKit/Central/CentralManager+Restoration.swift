import Foundation

/// State restoration keyed by restore identifiers (Core Bluetooth's
/// `CBCentralManagerOptionRestoreIdentifierKey`), on Linux.
///
/// A manager created with a restore identifier saves (on its own queue, at most once a second,
/// and once more when released: a process killed within a second of a change may restore the
/// state from before it), after every change, the scan it runs
/// and the peripherals it is connected to or waits for, with their discovered services and
/// subscriptions (``RestorationStore``, one file per identifier). When a later process creates
/// a manager with the same identifier, the first delegate call is
/// ``CentralManagerDelegate/centralManager(_:willRestoreState:)``; the manager then resumes on
/// its own: a link bluetoothd kept up is taken over (no `didConnect`, the peripheral is
/// `.connected`), other connections are requested again (they never time out), subscriptions
/// are enabled again once connected, and the scan restarts when the state is `.poweredOn`.
extension CentralManager {
    /// Why this manager did not restore or save state, if so: the identifier is used by another
    /// live manager in this process (the manager then stays `.unsupported` and does nothing),
    /// or the saved state could not be read (it was moved aside and the manager started fresh).
    public var restorationError: RestorationError? { restoration?.error }

    /// The restore identifiers with central state saved in `store` (default: the XDG state
    /// directory): what a launcher would relaunch, as iOS's
    /// `UIApplicationLaunchOptionsBluetoothCentralsKey`.
    public static func savedRestoreIdentifiers(in store: RestorationStore = .standard) -> [String] {
        store.savedIdentifiers(for: .central)
    }

    /// Saves the current state on the manager's queue, after the call that changed it.
    func saveStateSoon() {
        guard restoration != nil else { return }
        queue.async { self.saveState() }
    }

    /// Saves the current state now (on `queue`).
    func saveState() {
        guard let restoration else { return }
        let (linked, scan) = shared.withLock { ($0.linked, $0.scan) }
        restoration.save(CentralRestorationRecord(scan: scan, peripherals: linked.map(Self.record)))
    }

    private static func record(_ peripheral: Peripheral) -> CentralRestorationRecord.Peripheral {
        CentralRestorationRecord.Peripheral(
            identifier: peripheral.identifier, device: peripheral.deviceID.token, name: peripheral.name,
            services: peripheral.services?.map { service in
                CentralRestorationRecord.Service(
                    uuid: service.uuid.uuidString, isPrimary: service.isPrimary, token: service.id.token,
                    characteristics: service.characteristics?.map { characteristic in
                        CentralRestorationRecord.Characteristic(
                            uuid: characteristic.uuid.uuidString, properties: characteristic.properties.rawValue,
                            token: characteristic.id.token, isNotifying: characteristic.isNotifying)
                    })
            })
    }

    /// Delivers `willRestoreState` (on `queue`, before any other delegate call); the restored
    /// peripherals are `linked` (their links resume in the engine once powered on).
    func deliverRestoredState(_ peripherals: [Peripheral], scan: CentralRestorationRecord.Scan?) {
        shared.withLock { state in
            state.linked = peripherals
            state.scanToResume = scan
        }
        var dictionary: [String: Any] = [CBCentralManagerRestoredStatePeripheralsKey: peripherals]
        if let scan {
            dictionary[CBCentralManagerRestoredStateScanServicesKey] = scan.serviceUUIDs ?? []
            dictionary[CBCentralManagerRestoredStateScanOptionsKey] = scan.optionsDictionary
        }
        delegate?.centralManager(self, willRestoreState: dictionary)
    }

    /// Starts the restored (or interrupted) scan once powered on, unless the app already started one.
    func resumeRestoredScan() {
        let scan: CentralRestorationRecord.Scan? = shared.withLock { state in
            defer { state.scanToResume = nil }
            return state.isScanning ? nil : state.scanToResume
        }
        guard let scan else { return }
        scanForPeripherals(withServices: scan.serviceUUIDs, options: scan.options)
    }
}
