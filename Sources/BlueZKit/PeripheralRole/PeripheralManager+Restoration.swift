import Foundation

/// State restoration keyed by restore identifiers (Core Bluetooth's
/// `CBPeripheralManagerOptionRestoreIdentifierKey`), on Linux.
///
/// A manager created with a restore identifier saves its published services, the centrals
/// subscribed to their characteristics and its advertisement after every change: on its own
/// queue, at most once a second (a burst of changes is one write of the newest state), and
/// once more when the manager is released. A process killed within a second of a change may
/// therefore restore the state from before that change. A later
/// manager with the same identifier gets
/// ``PeripheralManagerDelegate/peripheralManager(_:willRestoreState:)`` first, then publishes
/// the services and advertises again on its own once the adapter is powered on.
///
/// The restored characteristics' ``MutableCharacteristic/subscribedCentrals`` are those of the
/// moment the state was saved. bluetoothd ends every subscription to an application when the
/// process that registered it goes away, so right after the first `didUpdateState` each of them
/// gets ``PeripheralManagerDelegate/peripheralManager(_:central:didUnsubscribeFrom:)-(_,_,Characteristic)`` (and the
/// list empties): a central that still wants values must subscribe again (bluetoothd tells
/// connected centrals that the services changed, twice: when they went and when they are back),
/// and ``PeripheralManagerDelegate/peripheralManager(_:central:didSubscribeTo:)-(_,_,Characteristic)`` reports it.
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
        post(.saveState)
    }

    /// Saves the current state now (on `queue`).
    func saveState() {
        guard let restoration else { return }
        let (services, removed, advertisement, options) = engine.sync {
            ($0.services, $0.inclusion.removed, $0.advertisementData, $0.advertisingOptions)
        }
        restoration.save(
            PeripheralRestorationRecord(
                services: Self.serviceRecords(services, excluding: removed), advertisement: advertisement,
                advertisingOptions: options))
    }

    /// Rebuilds the saved services and advertisement, to be published again once powered on,
    /// and delivers `willRestoreState` (before any other delegate call).
    func restore(_ saved: PeripheralRestorationRecord) {
        let services = Self.restoredServices(saved.services)
        // Options out of bluetoothd's ranges (a hand-edited file) are dropped, not sent.
        let options = saved.advertisingOptions.flatMap { $0.invalidReason == nil ? $0 : nil }
        let subscribed = Self.allCharacteristics(of: services).filter { !($0.subscribedCentrals ?? []).isEmpty }
        engine.sync { state in
            state.restoredSubscriptions = subscribed
            state.services = services
            state.advertisementData = saved.advertisement
            state.advertisingOptions = options
            state.wantedAdvertisement = saved.advertisement.map {
                PeripheralEngine.advertisementContent($0, options: options ?? .init())
            }
            state.registrationsLost = true
        }
        post(.willRestore(services: services, advertisement: saved.advertisement))
    }

    /// The restored subscriptions bluetoothd no longer has: reported as ended after the first
    /// `didUpdateState` (on `queue`), and saved so.
    func endRestoredSubscriptions() {
        let (characteristics, adapter) = engine.sync { state in
            defer { state.restoredSubscriptions = [] }
            return (state.restoredSubscriptions, state.adapterAddress)
        }
        guard !characteristics.isEmpty else { return }
        for characteristic in characteristics {
            let restored = characteristic.subscribedCentrals ?? []
            let current = engine.sync { $0.subscriptions.subscribers(of: ObjectIdentifier(characteristic)) }
                .map { engine.central(address: $0, adapter: adapter) }
            characteristic.setSubscribedCentrals(current)
            for central in restored where !current.contains(central) {
                delegate?.peripheralManager(
                    self, central: central, didUnsubscribeFrom: characteristic as Characteristic)
            }
        }
        saveState()
    }

    /// Every characteristic of `services` and of the services they include.
    static func allCharacteristics(of services: [MutableService]) -> [MutableCharacteristic] {
        var seen = Set<ObjectIdentifier>()
        var characteristics: [MutableCharacteristic] = []
        func visit(_ service: MutableService) {
            guard seen.insert(ObjectIdentifier(service)).inserted else { return }
            characteristics += service.publishedCharacteristics
            for included in service.publishedIncludedServices { visit(included) }
        }
        services.forEach(visit)
        return characteristics
    }
}
