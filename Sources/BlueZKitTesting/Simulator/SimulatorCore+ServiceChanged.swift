internal import DBus

/// A peripheral's GATT database changing while bluetoothd knows it: what BlueZ 5.66 does after a
/// Service Changed indication.
///
/// bluetoothd (`src/shared/gatt-client.c`) discovers the changed handle range again. A service
/// that is gone, or whose handle now holds something else, leaves the database
/// (`gatt_service_removed` → `btd_gatt_client_service_removed` → `unregister_service`): for each
/// characteristic its descriptors, then the characteristic, the service last, one
/// `InterfacesRemoved` per object. A service found anew is exported once its characteristics are
/// discovered (`gatt_service_added` → `export_service`): one `InterfacesAdded` per object, the
/// service first. `Device1.UUIDs` changes when the set of primary UUIDs does. `ServicesResolved`
/// stays true throughout: bluetoothd sets it only when the client becomes ready and when the
/// link goes down. Services outside the change keep their objects.
extension SimulatorCore {
    /// Commits `services` as the peripheral's database and updates what bluetoothd exports for it.
    func changeDatabase(of peripheral: SimulatedPeripheral, to services: [SimulatedService]) -> SimulatedBlueZError? {
        run { () -> SimulatedBlueZError? in
            let old = peripheral.layout
            let layout: GATTLayout
            do throws(SimulatedBlueZError) {
                layout = try GATTLayout.make(
                    services: services, standard: peripheral.includesStandardServices, deviceName: peripheral.name,
                    previous: old)
            } catch {
                return error
            }
            peripheral.database.withLock { $0 = services }
            peripheral.attachment.withLock { $0.layout = layout }
            link(layout, to: peripheral)
            // Attributes that left the database answer no handle any more.
            for service in old?.services ?? [] where !layout.services.contains(where: { $0.object === service.object })
            {
                service.object.link.attach(to: peripheral, handle: 0, pathSuffix: "")
                for characteristic in service.characteristics {
                    characteristic.object.link.attach(to: peripheral, handle: 0, pathSuffix: "")
                    for descriptor in characteristic.descriptors {
                        descriptor.object.link.attach(to: peripheral, handle: 0, pathSuffix: "")
                    }
                }
            }
            if let old, let path = devicePath(of: peripheral) { servicesChanged(path, from: old, to: layout) }
            return nil
        }
    }

    /// Replaces the exported objects of the services that changed between `old` and `new`.
    ///
    /// Without exported objects (never resolved, or forgotten at disconnection) there is nothing to
    /// do: the next resolution exports the new database. Objects bluetoothd keeps for a disconnected
    /// device (its GATT cache) change at once.
    private func servicesChanged(_ device: ObjectPath, from old: GATTLayout, to new: GATTLayout) {
        guard let state = devices[device], !state.gattPaths.isEmpty else { return }
        let removed = old.services.filter { service in !new.services.contains { Self.same($0, service) } }
        let added = new.services.filter { service in !old.services.contains { Self.same($0, service) } }
        guard !removed.isEmpty || !added.isEmpty else { return }
        let removedPaths = Set(removed.map { device.childOrRoot($0.pathElement) })
        for service in removed where isExported(service) { unregisterService(device.childOrRoot(service.pathElement)) }
        // gdbus sends `InterfacesRemoved` as the object is unregistered, not at the end of the turn.
        flushSignals(beforeReply: true)
        // `on_service_removed`: services that included a removed one lose it from `Includes`.
        for path in state.gattPaths {
            guard case .service(var node) = gattObjects[path], node.includes.contains(where: removedPaths.contains)
            else { continue }
            node.includes.removeAll { removedPaths.contains($0) }
            gattObjects[path] = .service(node)
            propertiesChanged(path, "org.bluez.GattService1", ["Includes"])
        }
        // The peer forgets the client configurations of the attributes that went.
        updateDevice(device) { state in
            for service in removed {
                state.clientConfigurations = state.clientConfigurations.filter { handle, _ in
                    !(service.handle...service.endHandle).contains(handle)
                }
            }
        }
        let oldUUIDs = state.uuids
        updateDevice(device) { state in
            // `gatt_service_removed` takes a gone service's UUID out of the profile list, also
            // when an advertisement had put it there.
            let gone = state.gattUUIDs.filter { !new.primaryUUIDs.contains($0) }
            state.collectedUUIDs.removeAll(where: gone.contains)
            state.gattUUIDs = new.primaryUUIDs
        }
        if devices[device]?.uuids != oldUUIDs { propertiesChanged(device, Self.deviceInterface, ["UUIDs"]) }
        for service in added where isExported(service) { exportService(service, of: device, in: new) }
        updateDevice(device) { state in
            state.gattPaths = Self.exportOrder(gattObjects.keys.filter { gattObjects[$0]?.device == device })
        }
        store(device)
    }

    /// Whether a service is unaffected by the change: same handles, same UUID, same definition.
    private static func same(_ a: GATTLayout.Service, _ b: GATTLayout.Service) -> Bool {
        guard a.handle == b.handle, a.endHandle == b.endHandle, a.uuid == b.uuid else { return false }
        return (a.isStandard && b.isStandard) || a.object === b.object
    }

    /// `unregister_service`: per characteristic its descriptors, then the characteristic; the service last.
    func unregisterService(_ service: ObjectPath) {
        var order: [ObjectPath] = []
        for characteristic in gattObjects.keys.filter({ $0.parent == service }).sorted() {
            order += gattObjects.keys.filter { $0.parent == characteristic }.sorted()
            order.append(characteristic)
        }
        order.append(service)
        for path in order {
            guard let node = gattObjects[path] else { continue }
            disposeAcquiredSockets(path)
            interfacesRemoved(path, [node.interface])
            gattObjects[path] = nil
        }
    }

    /// Whether bluetoothd exports `service` on D-Bus: a service a plugin claimed (the GAP service)
    /// only from 5.80, which exports claimed services read-only (`[GATT] ExportClaimedServices`,
    /// `read-only` by default, dbd6591bd); before, `export_service` skips it.
    func isExported(_ service: GATTLayout.Service) -> Bool {
        !service.isHidden || options.version >= .bluez5_82
    }

    /// Whether a write to `node` is refused because its service is one a plugin claimed (the
    /// GAP service, `profiles/gap/gas.c`): from 5.80 bluetoothd exports claimed services
    /// read-only and answers `WriteValue` and `AcquireWrite` on them `NotAuthorized`
    /// (`src/gatt-client.c`, `BT_GATT_EXPORT_READ_ONLY`, the default).
    func refusesWrites(to node: GATTNode) -> Bool {
        guard options.version >= .bluez5_82 else { return false }
        let service: ObjectPath
        switch node {
        case .characteristic(let characteristic): service = characteristic.service
        case .descriptor(let descriptor):
            guard case .characteristic(let characteristic)? = gattObjects[descriptor.characteristic] else {
                return false
            }
            service = characteristic.service
        default: return false
        }
        guard case .service(let claimed)? = gattObjects[service] else { return false }
        return claimed.uuid.lowercased().hasPrefix("00001800-")
    }

    /// `export_service`: the service, then each characteristic followed by its descriptors.
    /// Returns the paths exported, in that order.
    @discardableResult
    func exportService(_ service: GATTLayout.Service, of device: ObjectPath, in layout: GATTLayout) -> [ObjectPath] {
        var exported: [ObjectPath] = []
        let servicePath = device.childOrRoot(service.pathElement)
        let includes = service.includes.compactMap { handle in
            layout.services.first { $0.handle == handle && isExported($0) }.map { device.childOrRoot($0.pathElement) }
        }
        gattObjects[servicePath] = .service(
            .init(
                path: servicePath, device: device, uuid: service.uuid, isPrimary: service.isPrimary, includes: includes)
        )
        interfacesAdded(servicePath, ["org.bluez.GattService1"])
        exported.append(servicePath)
        for characteristic in service.characteristics {
            let path = servicePath.childOrRoot(characteristic.pathElement)
            gattObjects[path] = .characteristic(
                .init(
                    path: path, service: servicePath, device: device, uuid: characteristic.uuid,
                    valueHandle: characteristic.valueHandle, flags: characteristic.flags,
                    object: characteristic.object))
            interfacesAdded(path, ["org.bluez.GattCharacteristic1"])
            exported.append(path)
            for descriptor in characteristic.descriptors {
                let descriptorPath = path.childOrRoot(descriptor.pathElement)
                gattObjects[descriptorPath] = .descriptor(
                    .init(
                        path: descriptorPath, characteristic: path, device: device, uuid: descriptor.uuid,
                        kind: descriptor.kind, flags: descriptor.flags, object: descriptor.object,
                        characteristicValueHandle: characteristic.valueHandle))
                interfacesAdded(descriptorPath, ["org.bluez.GattDescriptor1"])
                exported.append(descriptorPath)
            }
        }
        return exported
    }

    /// Paths in export order: by handle, which the fixed-width hex path elements sort as.
    private static func exportOrder(_ paths: [ObjectPath]) -> [ObjectPath] { paths.sorted() }
}
