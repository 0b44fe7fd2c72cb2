internal import DBus

/// Connections: `Connect`, `Disconnect`, link loss, and the GATT objects that come and go with them.
extension SimulatorCore {
    func connectCall(_ invocation: DBusMethodInvocation, _ path: ObjectPath, extraDelay: Duration) {
        guard let device = devices[path], let adapter = adapters[device.adapterName] else { return }
        // An LE Connect to a connected device succeeds (AlreadyConnected is only for BR/EDR).
        if device.connected { return reply(invocation) }
        guard adapter.powered else { return reply(invocation, error: BlueZErrors.failed("Input/output error")) }
        if device.isConnecting {
            if device.pendingConnect == nil {
                // A Pair is connecting: this Connect completes with it.
                updateDevice(path) { $0.pendingConnect = invocation }
                return
            }
            return reply(invocation, error: BlueZErrors.failed("Operation already in progress"))
        }
        setTemporary(path, false)
        beginConnectAttempt(path, invocation: invocation, delay: options.timing.connection + extraDelay)
    }

    /// Starts an LE connection attempt: the link comes up after `delay` once the peripheral is
    /// reachable, or the attempt fails after the connect timeout.
    func beginConnectAttempt(_ path: ObjectPath, invocation: DBusMethodInvocation?, delay: Duration) {
        let attempt = makeAttemptID()
        updateDevice(path) { device in
            device.link = .connecting(attempt: attempt)
            device.pendingConnect = invocation
        }
        after(delay) {
            self.armedAttempts[path] = attempt
            self.tryEstablish(path, attempt: attempt)
        }
        after(delay + options.timing.connectTimeout) {
            guard self.devices[path]?.link == .connecting(attempt: attempt) else { return }
            self.armedAttempts[path] = nil
            self.updateDevice(path) { $0.link = .idle }
            if let pending = self.devices[path]?.pendingConnect {
                self.updateDevice(path) { $0.pendingConnect = nil }
                self.reply(pending, error: BlueZErrors.failed("le-connection-abort-by-local"))
            }
            self.cancelBonding(path, error: BlueZErrors.make("ConnectionAttemptFailed", "Page Timeout"))
        }
    }

    /// Establishes an armed attempt if the peripheral can be reached now.
    func tryEstablish(_ path: ObjectPath, attempt: Int) {
        guard let device = devices[path], device.link == .connecting(attempt: attempt),
            let adapter = adapters[device.adapterName], adapter.powered,
            let peripheral = peripheral(of: device), peripheral.isInRange, peripheral.isConnectable
        else { return }
        armedAttempts[path] = nil
        establish(path, peripheral: peripheral)
    }

    /// The peripheral was seen (it advertised or came into range): a waiting attempt may connect.
    func peripheralSeen(_ peripheral: SimulatedPeripheral) {
        guard let adapter = peripheral.attachment.withLock({ $0.adapterName }) else { return }
        let path = Self.devicePath(adapter: adapter, address: peripheral.address)
        if let attempt = armedAttempts[path] { tryEstablish(path, attempt: attempt) }
    }

    func establish(_ path: ObjectPath, peripheral: SimulatedPeripheral) {
        let generation = makeAttemptID()
        updateDevice(path) { device in
            device.link = .connected(generation: generation)
            device.connected = true
            device.mtu = min(517, max(23, peripheral.maximumMTU))
            device.clientConfigurations = [:]
        }
        setTemporary(path, false)
        clearTemporaryTimer(path)
        // bluetoothd's ATT socket usually wins over the kernel's connect event: no signal then
        // (`SimulatedBlueZ.Options.omitsConnectedSignal`, judged by `ConnectConformance`).
        if !options.omitsConnectedSignal { propertiesChanged(path, Self.deviceInterface, ["Connected"]) }
        if let pending = devices[path]?.pendingConnect {
            updateDevice(path) { $0.pendingConnect = nil }
            reply(pending)
        }
        if let bonding = devices[path]?.bonding, bonding.connectsFirst {
            after(options.timing.pairing) { self.completePairing(path, attempt: bonding.attempt) }
        }
        after(options.timing.serviceDiscovery) { self.resolveServices(path, generation: generation) }
    }

    /// GATT discovery finished: the device's `UUIDs` change, the objects are exported (first
    /// time), then `ServicesResolved` turns true.
    ///
    /// As `register_gatt_services` does, the device is touched (its `UUIDs`) before the services
    /// are exported, and the turn's signals leave in the order the objects were first touched:
    /// the device's `PropertiesChanged` (`UUIDs`, `ServicesResolved`) comes BEFORE the services'
    /// `InterfacesAdded`, as the real bluetoothd sends them on 5.66, 5.82 and 5.87
    /// (`GATTConformance`, run by ConformanceEndToEndTests).
    private func resolveServices(_ path: ObjectPath, generation: Int) {
        guard let device = devices[path], device.link == .connected(generation: generation),
            let peripheral = peripheral(of: device), let layout = peripheral.layout
        else { return }
        let oldUUIDs = device.uuids
        updateDevice(path) { device in
            device.gattUUIDs = layout.primaryUUIDs
            device.gattKnown = true
        }
        if devices[path]?.uuids != oldUUIDs { propertiesChanged(path, Self.deviceInterface, ["UUIDs"]) }
        if device.gattPaths.isEmpty { exportGATT(path, layout) }
        resubscribe(path)
        updateDevice(path) { $0.servicesResolved = true }
        propertiesChanged(path, Self.deviceInterface, ["ServicesResolved"])
        flushSignals(beforeReply: true)
        probeBattery(path, layout: layout, generation: generation)
        store(path)
        if let bonding = devices[path]?.bonding, bonding.connectsFirst, devices[path]?.paired == true {
            updateDevice(path) { $0.bonding = nil }
            reply(bonding.invocation)
        }
    }

    /// `Disconnect`, or `RemoveDevice` of a connected device (`device_request_disconnect`).
    func requestDisconnect(_ path: ObjectPath, replyTo invocation: DBusMethodInvocation, removing: Bool) {
        guard let device = devices[path] else { return }
        cancelBonding(path, error: BlueZErrors.make("AuthenticationCanceled", "Authentication Canceled"))
        cancelConnectAttempt(path, error: BlueZErrors.failed("br-connection-canceled"))
        guard device.connected, case .connected(let generation) = device.link else { return reply(invocation) }
        let wasWaiting = !device.pendingDisconnects.isEmpty
        updateDevice(path) { $0.pendingDisconnects.append(invocation) }
        if removing { removalRequested.insert(path) }
        guard !wasWaiting else { return }
        after(options.timing.disconnect) {
            guard self.devices[path]?.link == .connected(generation: generation) else { return }
            self.linkLost(path, .local)
        }
    }

    /// Fails a connection attempt in progress with `error`.
    func cancelConnectAttempt(_ path: ObjectPath, error: DBusError) {
        guard let device = devices[path], device.isConnecting else { return }
        armedAttempts[path] = nil
        updateDevice(path) { device in
            device.link = .idle
            device.pendingConnect = nil
        }
        if let pending = device.pendingConnect { reply(pending, error: error) }
    }

    /// The link went down (`device_remove_connection`): `ServicesResolved` and `Connected` turn false,
    /// waiting `Disconnect` calls are answered, and without a GATT cache the GATT objects go.
    /// `end` is why, which 5.87 announces first (`announceLinkEnd`).
    func linkLost(_ path: ObjectPath, _ end: LinkEnd) {
        guard devices[path]?.connected == true else { return }
        announceLinkEnd(path, end)
        cancelBonding(path, error: BlueZErrors.make("AuthenticationCanceled", "Authentication Canceled"))
        guard let device = devices[path] else { return }
        removeBattery(path)
        updateDevice(path) { device in
            device.connected = false
            device.servicesResolved = false
            device.link = .idle
            device.eirUUIDs = []
            device.clientConfigurations = [:]
        }
        shutDownAcquiredSockets(path)
        propertiesChanged(path, Self.deviceInterface, ["ServicesResolved"])
        for waiting in device.pendingDisconnects { reply(waiting) }
        updateDevice(path) { $0.pendingDisconnects = [] }
        propertiesChanged(path, Self.deviceInterface, ["Connected"])
        deviceLastSeen(path)
        let keepCache = options.gattCache == .always || (options.gattCache == .yes && device.paired)
        if !keepCache {
            removeGATTObjects(path)
            // `gatt_service_removed` takes each service's UUID out of the profile list too.
            let oldUUIDs = devices[path]?.uuids
            updateDevice(path) { device in
                device.collectedUUIDs.removeAll(where: device.gattUUIDs.contains)
                device.gattUUIDs = []
                device.gattKnown = false
            }
            if devices[path]?.uuids != oldUUIDs { propertiesChanged(path, Self.deviceInterface, ["UUIDs"]) }
        }
        if let pending = device.pendingConnect {
            updateDevice(path) { $0.pendingConnect = nil }
            reply(pending, error: BlueZErrors.failed("br-connection-canceled"))
        }
        if removalRequested.remove(path) != nil { removeDeviceObject(path, forget: true) }
    }

    // MARK: GATT objects

    /// Exports a device's GATT objects in bluetoothd's order: each service, then its
    /// characteristics, each followed by its descriptors. The GAP service stays hidden before 5.80
    /// (``isExported(_:)``).
    private func exportGATT(_ device: ObjectPath, _ layout: GATTLayout) {
        var exported: [ObjectPath] = []
        for service in layout.services where isExported(service) {
            exported += exportService(service, of: device, in: layout)
        }
        updateDevice(device) { $0.gattPaths = exported }
    }

    /// Removes a device's GATT objects as `unregister_service` does: per service, each
    /// characteristic's descriptors, then the characteristic; the service last.
    func removeGATTObjects(_ device: ObjectPath) {
        guard let paths = devices[device]?.gattPaths, !paths.isEmpty else { return }
        for service in paths where service.parent == device { unregisterService(service) }
        updateDevice(device) { $0.gattPaths = [] }
    }
}
