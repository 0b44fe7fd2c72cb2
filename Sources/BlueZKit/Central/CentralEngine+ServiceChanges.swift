import BlueZ
import Foundation

/// Changes of a connected peripheral's GATT database: Core Bluetooth's `didModifyServices`.
///
/// When a peripheral indicates Service Changed, BlueZ 5.66 discovers the changed range again and
/// updates its objects in place: `InterfacesRemoved` for each descriptor, characteristic and
/// service that went (`unregister_service`), `InterfacesAdded` for each one found anew
/// (`export_service`), while `ServicesResolved` stays true. One change makes a burst of such
/// signals; the first one for a device starts a collection, a round trip to bluetoothd lets the
/// rest of the burst arrive, then one event reports everything that changed. Changes before the
/// app's first service discovery of a link are part of the initial resolution, not modifications.
extension CentralEngine {
    /// A database change being collected for one device (queue-confined).
    struct ServiceChange {
        /// The GATT objects bluetoothd removed meanwhile (a path can come back for a new service).
        var removed: Set<AttributeID> = []
    }

    /// bluetoothd added or removed GATT objects of device `id` (on the queue).
    func gattObjectsChanged(_ id: DeviceID, removed: AttributeID?) {
        guard links[id]?.phase == .connected, client.device(id)?.servicesResolved == true,
            gatt[id]?.servicesDiscovered == true
        else { return }
        let collecting = gatt[id]?.serviceChange != nil
        if !collecting { gatt[id]?.serviceChange = ServiceChange() }
        if let removed { gatt[id]?.serviceChange?.removed.insert(removed) }
        guard !collecting else { return }
        onBusQueue { [self] in
            await client.synchronize(with: id)
            finishServiceChange(id)
        }
    }

    /// Drops the invalidated attributes from the model and reports the change (on the queue).
    private func finishServiceChange(_ id: DeviceID) {
        dispatchPrecondition(condition: .onQueue(busQueue))
        guard var model = gatt[id], let change = model.serviceChange, let peripheral = peripherals[id] else { return }
        model.serviceChange = nil
        model.invalidated.prune()
        let database = client.gattDatabase(of: id)
        let current = Dictionary(database.services.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let gone = { (attribute: AttributeID, exists: Bool) in change.removed.contains(attribute) || !exists }
        let invalidated = model.services.values.filter { service in
            gone(service.id, current[service.id].flatMap { BluetoothUUID(parsing: $0.uuid) } == service.uuid)
        }
        let appeared = database.services.contains { info in
            model.services[info.id] == nil || invalidated.contains { $0.id == info.id }
        }
        guard !invalidated.isEmpty || appeared else {
            gatt[id] = model
            return
        }
        let characteristicIDs = Set(database.characteristics.map(\.id))
        let descriptorIDs = Set(database.descriptors.map(\.id))
        for service in invalidated {
            model.services[service.id] = nil
            model.invalidated.insert(service)
        }
        let droppedCharacteristics = model.characteristics.filter { attribute, characteristic in
            guard let service = characteristic.service else { return true }
            return gone(attribute, characteristicIDs.contains(attribute)) || invalidated.contains { $0 === service }
        }
        for (attribute, characteristic) in droppedCharacteristics {
            model.characteristics[attribute] = nil
            model.invalidated.insert(characteristic)
            model.notifySockets.removeValue(forKey: attribute)?.close()
            model.writeChannels.removeValue(forKey: attribute)?.socket?.close()
            model.notifying.remove(attribute)
            model.notifyRoutes.removeValue(forKey: attribute)?.route.cancel()
            model.acquiringNotify[attribute] = nil
            restoredSubscriptions[id]?.removeAll { $0 == attribute }
        }
        let characteristics = model.characteristics
        let droppedDescriptors = model.descriptors.filter { attribute, descriptor in
            guard let characteristic = descriptor.characteristic else { return true }
            return gone(attribute, descriptorIDs.contains(attribute))
                || characteristics[characteristic.id] !== characteristic
        }
        for (attribute, descriptor) in droppedDescriptors {
            model.descriptors[attribute] = nil
            model.invalidated.insert(descriptor)
        }
        gatt[id] = model
        // In the order the app knows them.
        let known = peripheral.services ?? []
        let ordered =
            known.filter { service in invalidated.contains { $0 === service } }
            + invalidated.filter { service in !known.contains { $0 === service } }
        manager?.post(.gatt(peripheral, .modifiedServices(ordered)))
    }

    /// Whether bluetoothd removed `characteristic` in a database change still being collected
    /// (its notification socket closes with it: no fallback to `StartNotify`).
    func isBeingRemoved(_ characteristic: Characteristic, of id: DeviceID) -> Bool {
        gatt[id]?.serviceChange?.removed.contains(characteristic.id) == true
    }

    /// True unless `attribute` belongs to a service invalidated by a database change; then posts
    /// `event(invalidHandle)` (if any) and returns false.
    func isCurrent(
        _ attribute: AnyObject, of peripheral: Peripheral, else event: (BluetoothError) -> CentralManager.GattEvent?
    ) -> Bool {
        guard let model = gatt[peripheral.deviceID], model.invalidated.contains(attribute) else {
            return true
        }
        let message = "the attribute's service was invalidated by a change of the peripheral's services"
        if let failure = event(BluetoothError(.invalidHandle, message: message)) {
            manager?.post(.gatt(peripheral, failure))
        }
        return false
    }
}

extension CentralEngine {
    /// How many invalidated attributes the model of `peripheral` keeps (for tests; off the queue).
    func invalidatedAttributeCount(of peripheral: Peripheral) -> Int {
        busQueue.sync { gatt[peripheral.deviceID]?.invalidated.count ?? 0 }
    }
}
