import DBus

/// Which devices `Device1.UUIDs` describes by their advertisements, and which by their GATT
/// database.
///
/// bluetoothd answers `UUIDs` (`dev_property_get_uuids` in src/device.c, the same in 5.66, 5.82
/// and 5.87) with the advertised UUIDs it collected (`eir_uuids`) until the device's services are
/// resolved, then with its profile list (`uuids`): the resolved primary services, sorted, and
/// from 5.69 every UUID it collected from the advertisements before (`device_add_eir_uuids` adds
/// them there too, through `device_probe_profiles`). The resolution stays
/// (`svc_resolved`) while the GATT cache keeps the database, disconnected too (`[GATT] Cache =
/// always`, the default), and from then on bluetoothd stops collecting advertised UUIDs
/// (`device_add_eir_uuids` returns early). `AdvertisingData` never carries the UUID list types
/// either (`type_reject_list` in src/shared/ad.c rejects AD types 0x02 to 0x07), so what such a
/// device advertises is not on the bus at all.
extension BlueZClient {
    /// The service UUIDs `device` advertised, as bluetoothd reports them in `Device1.UUIDs`, or nil
    /// while that property holds the device's resolved GATT services instead (on the queue).
    ///
    /// The list is bluetoothd's `eir_uuids`: every UUID of the UUID list AD types (0x02 to 0x07)
    /// and, from 5.69, every service data key (`add_service_data`), accumulated since the
    /// device object was made or last disconnected. A device counts as resolved while it is
    /// `ServicesResolved` or has `GattService1` objects (exported from the GATT cache while
    /// disconnected), and so does a connected one: during its service discovery bluetoothd may
    /// answer the services it found before it says `ServicesResolved` (when it collected no
    /// advertised UUIDs, `UUIDs` falls back to them). A device bluetoothd loaded from its storage
    /// (a bond) answers its stored services until an advertisement adds advertised UUIDs: that
    /// case is not told apart.
    package func advertisedUUIDs(of id: DeviceID, _ device: BlueZDeviceProperties) -> [String]? {
        if device.connected || device.servicesResolved || gattServices[id] != nil { return nil }
        return device.uuids
    }

    /// Keeps ``gattServices`` in step with the object cache (on the queue, for each cache event).
    func trackGattServices(_ event: BlueZObjectCache.Event) {
        let service = BlueZNames.gattService.rawValue
        switch event {
        case .loaded, .vanished:
            var services: [DeviceID: Set<ObjectPath>] = [:]
            for (path, interfaces) in cache.objects where interfaces[service] != nil {
                if let device = DeviceID(containing: path) { services[device, default: []].insert(path) }
            }
            gattServices = services
        case .interfacesAdded(let path, let interfaces):
            guard interfaces[service] != nil, let device = DeviceID(containing: path) else { return }
            gattServices[device, default: []].insert(path)
        case .interfacesRemoved(let path, let interfaces):
            if interfaces.contains(BlueZNames.device.rawValue) {
                gattServices[DeviceID(path: path)] = nil
                return
            }
            guard interfaces.contains(service), let device = DeviceID(containing: path),
                var paths = gattServices[device]
            else { return }
            paths.remove(path)
            gattServices[device] = paths.isEmpty ? nil : paths
        case .propertiesChanged, .valueChanged, .loadFailed:
            break
        }
    }
}
