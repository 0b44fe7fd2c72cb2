internal import DBus

/// Discovery sessions and advertisement reports, as `src/adapter.c` of bluetoothd 5.66 handles them.
extension SimulatorCore {
    /// Recomputes the kernel filter after a session or filter changed; starts, restarts or stops scanning.
    ///
    /// Starting replies first, then `Discovering` turns true; a changed filter
    /// restarts the scan. Either way every peripheral in range is reported
    /// again in the next turn (the kernel's duplicate filter starts afresh).
    func updateDiscovery(_ name: String, replyTo invocation: DBusMethodInvocation?) {
        guard let adapter = adapters[name] else { return }
        let sessions = adapter.sessions
        if sessions.isEmpty {
            if let invocation { reply(invocation) }
            if adapter.discovering { finishDiscovery(name) }
            return
        }
        let filter = KernelFilter.merge(
            sessions.map(\.filter), scanType: adapter.scanType,
            mergesPlainFiltersAsRegular: options.version != .bluez5_66)
        if adapter.discovering && filter == adapter.kernelFilter {
            if let invocation { reply(invocation) }
            return
        }
        updateAdapter(name) { $0.kernelFilter = filter }
        if !adapter.discoverable && sessions.contains(where: { $0.filter?.discoverable == true }) {
            updateAdapter(name) { adapter in
                adapter.discoverable = true
                adapter.discoverableForDiscovery = true
            }
            propertiesChanged(adapter.path, Self.adapterInterface, ["Discoverable"])
        }
        if let invocation { reply(invocation) }
        if !adapter.discovering {
            updateAdapter(name) { $0.discovering = true }
            propertiesChanged(adapter.path, Self.adapterInterface, ["Discovering"])
        }
        after(.zero) { self.reportAll(name) }
    }

    /// Ends one client's session; the last one stops the scan.
    func stopDiscovery(
        _ name: String, client owner: String, replyTo invocation: DBusMethodInvocation?, forget: Bool = false
    ) {
        updateAdapter(name) { adapter in
            guard let index = adapter.clients.firstIndex(where: { $0.owner == owner }) else { return }
            if forget || adapter.clients[index].filter == nil {
                adapter.clients.remove(at: index)
            } else {
                adapter.clients[index].discovering = false
            }
        }
        guard let adapter = adapters[name] else { return }
        if !adapter.sessions.isEmpty {
            updateDiscovery(name, replyTo: invocation)
            return
        }
        if let invocation { reply(invocation) }
        finishDiscovery(name)
    }

    /// A client left the bus: its sessions stop and its filters go (`discovery_disconnect`).
    func clientLeft(_ owner: String) {
        for name in adapters.keys.sorted() where adapters[name]?.clients.contains(where: { $0.owner == owner }) == true
        {
            stopDiscovery(name, client: owner, replyTo: nil, forget: true)
        }
        for path in gattObjects.keys.sorted() {
            guard case .characteristic(let node) = gattObjects[path], node.notifyClients.contains(owner) else {
                continue
            }
            removeNotifySession(path, owner: owner)
        }
        agentLeavesDefaultQueue(owner)
        agents[owner] = nil
        applicationOwnerLeft(owner)
        advertisementOwnerLeft(owner)
        monitorOwnerLeft(owner)
    }

    private func finishDiscovery(_ name: String) {
        guard let adapter = adapters[name], adapter.discovering else { return }
        discoveryCleanup(name)
        updateAdapter(name) { adapter in
            adapter.discovering = false
            adapter.kernelFilter = nil
        }
        var changed = ["Discovering"]
        if adapter.discoverableForDiscovery {
            updateAdapter(name) { adapter in
                adapter.discoverable = false
                adapter.discoverableForDiscovery = false
            }
            changed.insert("Discoverable", at: 0)
        }
        propertiesChanged(adapter.path, Self.adapterInterface, changed)
    }

    /// Invalidates the RSSI and TX power of the devices this discovery reported and drops
    /// temporary devices that are not connectable (`discovery_cleanup`).
    func discoveryCleanup(_ name: String) {
        guard let adapter = adapters[name] else { return }
        for path in adapter.discoveryFound.sorted(by: { $0.value < $1.value }).map(\.key) {
            guard let device = devices[path] else { continue }
            var changed: [String] = []
            if device.rssi != nil { changed.append("RSSI") }
            if device.txPower != nil { changed.append("TxPower") }
            updateDevice(path) { device in
                device.rssi = nil
                device.txPower = nil
            }
            if !changed.isEmpty { propertiesChanged(path, Self.deviceInterface, changed) }
        }
        updateAdapter(name) { adapter in
            adapter.discoveryFound = [:]
            adapter.discoveryFoundCount = 0
        }
        for path in devices.keys.sorted() {
            guard let device = devices[path], device.adapterName == name, device.temporary,
                !device.lastSeenConnectable, !device.connected
            else { continue }
            removeDeviceObject(path, forget: true)
        }
    }

    /// Reports every peripheral in range of a discovering adapter, as after a scan (re)start.
    func reportAll(_ name: String) {
        for peripheral in air[name] ?? [] where peripheral.isInRange { report(peripheral) }
    }

    /// Processes one advertisement of `peripheral` (`btd_adapter_update_found_device`).
    func report(_ peripheral: SimulatedPeripheral) {
        // The adapter's fields rather than a copy of its state, which would be alive when
        // `discoveryFound` changes below and make that copy its whole table.
        guard let name = peripheral.attachment.withLock({ $0.adapterName }), peripheral.isInRange,
            adapters[name]?.powered == true
        else { return }
        // Advertisement monitors see advertisements without a discovery session (passive scanning).
        let monitors = matchingMonitors(peripheral, adapter: name)
        let discovering = adapters[name]?.discovering == true
        guard discovering || !monitors.isEmpty else { return }
        let filteredDiscovery = adapters[name]?.filteredDiscovery ?? false
        let ad = peripheral.advertisement.withLock { $0 }
        let uuids = ad.serviceUUIDs.compactMap(BluetoothText.uuid)
        if monitors.isEmpty, let kernel = adapters[name]?.kernelFilter, !kernel.passes(uuids: uuids, rssi: ad.rssi) {
            return
        }
        let sessions = adapters[name]?.sessions ?? []
        var discoverable = filteredDiscovery || ad.flags & 0x03 != 0
        for case let pattern? in sessions.map({ $0.filter?.pattern }) {
            discoverable = false
            if pattern.isEmpty || peripheral.address.hasPrefix(pattern) || (ad.name?.hasPrefix(pattern) ?? false) {
                discoverable = true
                break
            }
        }
        if !monitors.isEmpty { discoverable = true }
        let path = Self.devicePath(adapter: name, address: peripheral.address)
        if devices[path] == nil {
            // From 5.78 ("adapter: Create devices if they are connectable") until 5.84, a
            // connectable advertiser gets a device even when not discoverable, and nothing more:
            // its advertisement is not applied (seen on the real 5.82, not on 5.87:
            // DiscoveryConformance): of the simulator's releases, 5.82 only.
            let createdAsConnectable = !discoverable && ad.isConnectable && options.version == .bluez5_82
            guard discoverable || createdAsConnectable else { return }
            devices[path] = DeviceState(
                path: path, adapterName: name, address: peripheral.address, addressType: peripheral.addressType)
            interfacesAdded(path, [Self.deviceInterface])
            if createdAsConnectable {
                updateDevice(path) { $0.lastSeenConnectable = true }
                deviceLastSeen(path)
                return
            }
        }
        updateDevice(path) { $0.lastSeenConnectable = ad.isConnectable }
        deviceLastSeen(path)
        if let advertised = ad.name, advertised != devices[path]?.name {
            let aliasFollows = devices[path]?.alias == nil
            updateDevice(path) { $0.name = advertised }
            propertiesChanged(path, Self.deviceInterface, aliasFollows ? ["Name", "Alias"] : ["Name"])
        }
        let matches = sessions.contains { session in
            guard let filter = session.filter, !filter.uuids.isEmpty else { return true }
            return filter.uuids.contains(where: uuids.contains)
        }
        guard discoverable, !filteredDiscovery || matches || !monitors.isEmpty else { return }
        applyAdvertisement(
            ad, uuids: uuids, to: path, threshold: filteredDiscovery ? 0 : 8,
            duplicates: sessions.contains { $0.filter?.duplicateData == true })
        if discovering, adapters[name]?.discoveryFound[path] == nil, let rank = adapters[name]?.discoveryFoundCount {
            adapters[name]?.discoveryFound[path] = rank
            adapters[name]?.discoveryFoundCount = rank + 1
        }
        monitorsFound(monitors, device: path)
    }

    private func applyAdvertisement(
        _ ad: SimulatedPeripheral.Advertisement, uuids: [String], to path: ObjectPath, threshold: Int, duplicates: Bool
    ) {
        guard let device = devices[path] else { return }
        var changed: [String] = []
        let old = Int(device.rssi ?? 0)
        let new = Int(ad.rssi)
        let report = (new == 0 || old == 0) ? old != new : abs(old - new) >= threshold
        if report {
            updateDevice(path) { $0.rssi = new == 0 ? nil : ad.rssi }
            changed.append("RSSI")
        }
        if let txPower = ad.txPower, txPower != device.txPower {
            updateDevice(path) { $0.txPower = txPower }
            changed.append("TxPower")
        }
        if let appearance = ad.appearance, appearance != device.appearance {
            updateDevice(path) { $0.appearance = appearance }
            changed.append("Appearance")
        }
        if !device.gattKnown {
            let added = uuids.filter { !device.eirUUIDs.contains($0) }
            if collectAdvertised(added, path) { changed.append("UUIDs") }
        }
        var manufacturer = duplicates ? [:] : device.manufacturerData
        var manufacturerChanged = false
        for (company, bytes) in ad.manufacturerData where manufacturer[company] != bytes || duplicates {
            manufacturer[company] = bytes
            manufacturerChanged = true
        }
        if manufacturerChanged {
            updateDevice(path) { $0.manufacturerData = manufacturer }
            changed.append("ManufacturerData")
        }
        var serviceData = duplicates ? [:] : device.serviceData
        var serviceDataChanged = false
        for (key, bytes) in ad.serviceData {
            guard let uuid = BluetoothText.uuid(key), serviceData[uuid] != bytes || duplicates else { continue }
            serviceData[uuid] = bytes
            serviceDataChanged = true
        }
        if serviceDataChanged {
            updateDevice(path) { $0.serviceData = serviceData }
            changed.append("ServiceData")
            // From 5.69 `add_service_data` adds each new or changed key to the advertised UUIDs
            // as well ("profile: Add probe_on_discover flag").
            if devices[path]?.gattKnown == false, options.version != .bluez5_66 {
                let keys = ad.serviceData.keys.compactMap(BluetoothText.uuid).filter { key in
                    device.serviceData[key] != serviceData[key] || duplicates
                }
                let added = keys.filter { !(devices[path]?.eirUUIDs.contains($0) ?? true) }
                if collectAdvertised(added, path), !changed.contains("UUIDs") { changed.append("UUIDs") }
            }
        }
        if device.advertisingFlags != ad.flags {
            updateDevice(path) { $0.advertisingFlags = ad.flags }
            changed.append("AdvertisingFlags")
        }
        if !changed.isEmpty { propertiesChanged(path, Self.deviceInterface, changed) }
    }

    /// `device_add_eir_uuids`: appends `added` to the advertised UUIDs and, from 5.69 (through
    /// `device_probe_profiles`), to the profile list; true when bluetoothd signals `UUIDs`: in
    /// 5.66 whenever the advertised UUIDs grew, from 5.69 only when the profile list grew.
    private func collectAdvertised(_ added: [String], _ path: ObjectPath) -> Bool {
        guard !added.isEmpty, let before = devices[path] else { return false }
        if options.version == .bluez5_66 {
            updateDevice(path) { $0.eirUUIDs += added }
            return true
        }
        updateDevice(path) { device in
            device.eirUUIDs += added
            device.collectedUUIDs += added.filter { !device.collectedUUIDs.contains($0) }
        }
        return devices[path]?.profileUUIDs != before.profileUUIDs
    }
}
