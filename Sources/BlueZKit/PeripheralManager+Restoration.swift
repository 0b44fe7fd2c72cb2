import Foundation

/// State restoration keyed by restore identifiers (Core Bluetooth's
/// `CBPeripheralManagerOptionRestoreIdentifierKey`), on Linux.
///
/// A manager created with a restore identifier saves its published services and its
/// advertisement after every change. A later manager with the same identifier gets
/// ``PeripheralManagerDelegate/peripheralManager(_:willRestoreState:)`` first, then publishes
/// the services and advertises again on its own once the adapter is powered on.
extension PeripheralManager {
    /// Why this manager did not restore or save state, if so: the identifier is used by another
    /// live manager in this process (the manager then stays `.unsupported` and does nothing),
    /// or the saved state could not be read (it was moved aside and the manager started fresh).
    public var restorationError: RestorationError? { restoration?.error }

    /// The restore identifiers with peripheral state saved in `store` (default: the XDG state
    /// directory): what a launcher would relaunch, as iOS's
    /// `UIApplicationLaunchOptionsBluetoothPeripheralsKey`.
    public static func savedRestoreIdentifiers(in store: RestorationStore = .standard) -> [String] {
        store.savedIdentifiers(for: .peripheral)
    }

    /// Saves the current state on the manager's queue, after the call that changed it.
    func saveStateSoon() {
        guard restoration != nil else { return }
        queue.async { self.saveState() }
    }

    /// Saves the current state now (on `queue`).
    func saveState() {
        guard let restoration else { return }
        let (services, removed, advertisement) = shared.withLock {
            ($0.services, $0.inclusion.removed, $0.advertisementData)
        }
        restoration.save(
            PeripheralRestorationRecord(
                services: Self.serviceRecords(services, excluding: removed), advertisement: advertisement))
    }

    /// Rebuilds the saved services and advertisement, to be published again once powered on,
    /// and delivers `willRestoreState` (before any other delegate call).
    func restore(_ saved: PeripheralRestorationRecord) {
        let services = Self.restoredServices(saved.services)
        shared.withLock { state in
            state.services = services
            state.advertisementData = saved.advertisement
            state.wantedAdvertisement = saved.advertisement.map(Self.advertisementContent)
            state.registrationsLost = true
        }
        var dictionary: [String: Any] = [CBPeripheralManagerRestoredStateServicesKey: services]
        if let advertisement = saved.advertisement {
            dictionary[CBPeripheralManagerRestoredStateAdvertisementDataKey] = advertisement.dictionary
        }
        nonisolated(unsafe) let restored = dictionary
        queue.async { self.delegate?.peripheralManager(self, willRestoreState: restored) }
    }
}
