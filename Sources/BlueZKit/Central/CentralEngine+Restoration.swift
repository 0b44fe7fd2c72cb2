import BlueZ
import Foundation

/// Restored peripherals: their objects rebuilt from saved state, their links taken over or
/// requested again, their subscriptions enabled again.
extension CentralEngine {
    /// Builds the saved peripherals with their services, characteristics and notify state;
    /// their links are resumed once the adapter is powered on. Any thread but the queue.
    func restore(_ record: CentralRestorationRecord) -> [Peripheral] {
        busQueue.sync {
            var restored: [Peripheral] = []
            for saved in record.peripherals {
                guard let id = DeviceID(token: saved.device), peripherals[id] == nil else { continue }
                let peripheral = Peripheral(identifier: saved.identifier, deviceID: id, name: saved.name, engine: self)
                peripherals[id] = peripheral
                knownNames[id] = saved.name
                var model = GattModel()
                var subscriptions: [AttributeID] = []
                peripheral.update(
                    services: saved.services?.compactMap { savedService -> Service? in
                        guard let uuid = BluetoothUUID(parsing: savedService.uuid),
                            let serviceID = AttributeID(token: savedService.token)
                        else { return nil }
                        let service = Service(
                            uuid: uuid, isPrimary: savedService.isPrimary, peripheral: peripheral, id: serviceID)
                        model.services[serviceID] = service
                        if let characteristics = savedService.characteristics {
                            service.setCharacteristics(
                                characteristics.compactMap { saved -> Characteristic? in
                                    guard let uuid = BluetoothUUID(parsing: saved.uuid),
                                        let attribute = AttributeID(token: saved.token)
                                    else { return nil }
                                    let characteristic = Characteristic(
                                        uuid: uuid, properties: CharacteristicProperties(rawValue: saved.properties),
                                        service: service, id: attribute)
                                    characteristic.update(notifying: saved.isNotifying)
                                    model.characteristics[attribute] = characteristic
                                    if saved.isNotifying {
                                        model.notifying.insert(attribute)
                                        subscriptions.append(attribute)
                                    }
                                    return characteristic
                                })
                        }
                        return service
                    })
                if saved.services != nil { gatt[id] = model }
                for attribute in subscriptions { updateNotifyRoute(id, attribute) }
                restoredSubscriptions[id] = subscriptions
                restoredLinks.append(id)
                restored.append(peripheral)
            }
            return restored
        }
    }

    /// Once powered on: take over links bluetoothd kept, request the others again (on the queue).
    func resumeRestoredLinks() {
        let waiting = restoredLinks
        restoredLinks = []
        for id in waiting where links[id] == nil {
            guard let peripheral = peripherals[id] else { continue }
            if client.device(id)?.connected == true {
                var link = Link()
                link.phase = .connected
                links[id] = link
                manager?.post(.link(peripheral, .adopted))
                resubscribeRestored(id)
            } else {
                links[id] = Link()
                manager?.post(.link(peripheral, .connecting))
                attempt(id)
            }
        }
        updateBackgroundDiscovery()
    }

    /// Enables the restored subscriptions of a connected peripheral whose services are resolved
    /// (bluetoothd ended our earlier notify sessions with the process that held them).
    func resubscribeRestored(_ id: DeviceID) {
        guard links[id]?.phase == .connected, client.device(id)?.servicesResolved == true,
            let attributes = restoredSubscriptions.removeValue(forKey: id), !attributes.isEmpty,
            let peripheral = peripherals[id]
        else { return }
        for attribute in attributes {
            guard let characteristic = gatt[id]?.characteristics[attribute] else { continue }
            subscribe(peripheral, characteristic, report: false)
        }
    }
}
