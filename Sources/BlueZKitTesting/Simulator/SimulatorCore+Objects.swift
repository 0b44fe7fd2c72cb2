internal import DBus

/// The object tree clients see: which objects exist, their interfaces and their properties.
extension SimulatorCore {
    static let bluezPath = ObjectPath.root.childOrRoot("org").childOrRoot("bluez")
    static let adapterInterface = "org.bluez.Adapter1"
    static let deviceInterface = "org.bluez.Device1"

    /// Every object `GetManagedObjects` reports, sorted by path.
    func objectPaths() -> [ObjectPath] {
        var paths: [ObjectPath] = [Self.bluezPath]
        paths += adapters.values.map(\.path)
        paths += devices.keys
        paths += gattObjects.keys
        return paths.sorted()
    }

    /// The interfaces at `path`, in the order bluetoothd registers them; empty when there is no object.
    func interfaces(at path: ObjectPath) -> [String] {
        if path == Self.bluezPath { return ["org.bluez.AgentManager1", "org.bluez.ProfileManager1"] }
        if adapter(at: path) != nil {
            let base = [Self.adapterInterface, Self.gattManagerInterface, Self.advertisingManagerInterface]
            return options.advertisementMonitor || options.experimental ? base + [Self.monitorManagerInterface] : base
        }
        if let device = devices[path] {
            return device.batteryExported ? [Self.deviceInterface, Self.batteryInterface] : [Self.deviceInterface]
        }
        if let node = gattObjects[path] { return [node.interface] }
        return []
    }

    /// The properties of `interface` at `path` as clients see them (overrides applied); nil when absent.
    func properties(of path: ObjectPath, interface: String) -> [String: DBusValue]? {
        guard var values = rawProperties(of: path, interface: interface) else { return nil }
        for (key, override) in overrides where key.path == path.rawValue && key.interface == interface {
            switch override {
            case .missing: values[key.name] = nil
            case .wrongType:
                if case .string = values[key.name] {
                    values[key.name] = .int32(0x5a5a)
                } else {
                    values[key.name] = .string("wrong-type")
                }
            case .string(let text): values[key.name] = .string(text)
            case .strings(let texts): values[key.name] = .stringArray(texts)
            }
        }
        return values
    }

    /// `a{oa{sa{sv}}}` for `GetManagedObjects`.
    func managedObjects() -> DBusValue {
        let entries = objectPaths().map { path in
            let interfaces = interfaces(at: path).compactMap { name in
                properties(of: path, interface: name).map {
                    DBusValue.DictionaryEntry(.string(name), .stringVariantDictionary($0))
                }
            }
            return DBusValue.DictionaryEntry(.objectPath(path), .dictionary(key: "s", value: "a{sv}", interfaces))
        }
        return .dictionary(key: "o", value: "a{sa{sv}}", entries)
    }

    private func rawProperties(of path: ObjectPath, interface: String) -> [String: DBusValue]? {
        guard interfaces(at: path).contains(interface) else { return nil }
        if path == Self.bluezPath { return [:] }
        if let adapter = adapter(at: path) {
            switch interface {
            case Self.adapterInterface: return adapterProperties(adapter)
            case Self.advertisingManagerInterface: return advertisingManagerProperties(adapter.name)
            case Self.monitorManagerInterface: return monitorManagerProperties()
            default: return [:]
            }
        }
        if let device = devices[path] {
            return interface == Self.batteryInterface ? batteryProperties(device) : deviceProperties(device)
        }
        if let node = gattObjects[path] { return gattProperties(node) }
        return nil
    }

    private func adapterProperties(_ adapter: AdapterState) -> [String: DBusValue] {
        var values: [String: DBusValue] = [
            "Address": .string(adapter.address),
            "AddressType": .string("public"),
            "Name": .string(adapter.configuration.systemName),
            "Alias": .string(adapter.effectiveAlias),
            "Class": .uint32(adapter.deviceClass),
            "Powered": .bool(adapter.powered),
            "Discoverable": .bool(adapter.discoverable),
            "DiscoverableTimeout": .uint32(adapter.discoverableTimeout),
            "Pairable": .bool(adapter.pairable),
            "PairableTimeout": .uint32(adapter.pairableTimeout),
            "Discovering": .bool(adapter.discovering),
            "UUIDs": .stringArray(adapter.configuration.uuids),
            "Roles": .stringArray(adapter.configuration.roles),
        ]
        if let modalias = adapter.configuration.modalias { values["Modalias"] = .string(modalias) }
        if options.version >= .bluez5_82 {
            values["Manufacturer"] = .uint16(0x05F1)  // The Linux Foundation: btvirt's
            values["Connectable"] = .bool(adapter.powered)
        }
        return values
    }

    private func deviceProperties(_ device: DeviceState) -> [String: DBusValue] {
        var values: [String: DBusValue] = [
            "Address": .string(device.address),
            "AddressType": .string(device.addressType.rawValue),
            "Alias": .string(device.effectiveAlias),
            "Paired": .bool(device.paired),
            "Bonded": .bool(device.bonded),
            "Trusted": .bool(device.trusted),
            "Blocked": .bool(device.blocked),
            "LegacyPairing": .bool(false),
            "Connected": .bool(device.connected),
            "UUIDs": .stringArray(device.uuids),
            "Adapter": .objectPath(Self.adapterPath(device.adapterName)),
            "ServicesResolved": .bool(device.servicesResolved),
        ]
        if let name = device.name { values["Name"] = .string(name) }
        if let appearance = device.appearance { values["Appearance"] = .uint16(appearance) }
        if let rssi = device.rssi { values["RSSI"] = .int16(rssi) }
        if let txPower = device.txPower { values["TxPower"] = .int16(txPower) }
        if let flags = device.advertisingFlags { values["AdvertisingFlags"] = .bytes([flags]) }
        if !device.manufacturerData.isEmpty {
            values["ManufacturerData"] = .dictionary(
                key: "q", value: "v",
                device.manufacturerData.sorted { $0.key < $1.key }.map {
                    .init(.uint16($0.key), .variant(.bytes($0.value)))
                })
        }
        if !device.serviceData.isEmpty {
            values["ServiceData"] = .dictionary(
                key: "s", value: "v",
                device.serviceData.sorted { $0.key < $1.key }.map { .init(.string($0.key), .variant(.bytes($0.value))) }
            )
        }
        return values
    }

    private func gattProperties(_ node: GATTNode) -> [String: DBusValue] {
        switch node {
        case .service(let service):
            return [
                "UUID": .string(service.uuid), "Device": .objectPath(service.device),
                "Primary": .bool(service.isPrimary), "Includes": .objectPathArray(service.includes),
            ]
        case .characteristic(let characteristic):
            var values: [String: DBusValue] = [
                "UUID": .string(characteristic.uuid), "Service": .objectPath(characteristic.service),
                "Value": .bytes(characteristic.cachedValue), "Flags": .stringArray(characteristic.flags.remoteFlags),
            ]
            let properties = characteristic.flags.properties
            if characteristic.flags.canNotify { values["Notifying"] = .bool(characteristic.notifying) }
            // Both exist for the property they are about (not for indicate-only) and read true while
            // acquired, even before the socket is there (`write_io` / `notify_io` set).
            if properties & AttributeFlags.writeWithoutResponse != 0 {
                values["WriteAcquired"] = .bool(characteristic.writeIO != nil)
            }
            if properties & AttributeFlags.notify != 0 {
                values["NotifyAcquired"] = .bool(characteristic.notifyIO != nil)
            }
            if let device = devices[characteristic.device], device.connected { values["MTU"] = .uint16(device.mtu) }
            return values
        case .descriptor(let descriptor):
            return [
                "UUID": .string(descriptor.uuid), "Characteristic": .objectPath(descriptor.characteristic),
                "Value": .bytes(descriptor.cachedValue),
            ]
        }
    }
}
