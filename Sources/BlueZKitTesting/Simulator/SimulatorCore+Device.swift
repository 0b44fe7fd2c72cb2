internal import DBus

/// `org.bluez.Device1`: the device cache, writable properties and pairing.
extension SimulatorCore {
    /// Applies a change to a device's state.
    func updateDevice(_ path: ObjectPath, _ body: (inout DeviceState) -> Void) {
        guard var device = devices[path] else { return }
        body(&device)
        devices[path] = device
    }

    func handleDeviceCall(
        _ invocation: DBusMethodInvocation, _ member: String, _ path: ObjectPath, extraDelay: Duration
    ) {
        guard devices[path] != nil else { return reply(invocation, error: BlueZErrors.unknownObject(path.rawValue)) }
        switch member {
        case "Connect": connectCall(invocation, path, extraDelay: extraDelay)
        case "Disconnect": requestDisconnect(path, replyTo: invocation, removing: false)
        case "Pair": pairCall(invocation, path, extraDelay: extraDelay)
        case "CancelPairing":
            guard devices[path]?.bonding != nil else { return reply(invocation, error: BlueZErrors.doesNotExist) }
            cancelBonding(path, error: BlueZErrors.make("AuthenticationCanceled", "Authentication Canceled"))
            reply(invocation)
        default:
            reply(invocation, error: BlueZErrors.make("NotAvailable", "br-connection-profile-unavailable"))
        }
    }

    func setDeviceProperty(_ invocation: DBusMethodInvocation, _ path: ObjectPath, _ name: String, _ value: DBusValue) {
        guard let device = devices[path] else { return }
        switch name {
        case "Alias":
            let alias = value.stringValue ?? ""
            updateDevice(path) { $0.alias = alias.isEmpty ? nil : alias }
            if devices[path]?.effectiveAlias != device.effectiveAlias {
                propertiesChanged(path, Self.deviceInterface, ["Alias"])
            }
        case "Trusted":
            let trusted = value.boolValue ?? false
            updateDevice(path) { $0.trusted = trusted }
            if trusted != device.trusted { propertiesChanged(path, Self.deviceInterface, ["Trusted"]) }
        default:
            let blocked = value.boolValue ?? false
            updateDevice(path) { $0.blocked = blocked }
            if blocked != device.blocked { propertiesChanged(path, Self.deviceInterface, ["Blocked"]) }
            if blocked && device.connected { linkLost(path, .local) }
        }
        store(path)
        reply(invocation)
    }

    // MARK: Pairing

    private func pairCall(_ invocation: DBusMethodInvocation, _ path: ObjectPath, extraDelay: Duration) {
        guard let device = devices[path] else { return }
        setTemporary(path, false, byPairing: true)
        if device.bonding != nil { return reply(invocation, error: BlueZErrors.inProgress) }
        if device.bonded { return reply(invocation, error: BlueZErrors.alreadyExists) }
        let attempt = makeAttemptID()
        let connectsFirst = !device.connected
        updateDevice(path) {
            $0.bonding = .init(invocation: invocation, attempt: attempt, connectsFirst: connectsFirst)
        }
        let delay = options.timing.pairing + extraDelay
        if connectsFirst {
            if !device.isConnecting { beginConnectAttempt(path, invocation: nil, delay: delay) }
        } else {
            after(delay) { self.completePairing(path, attempt: attempt) }
        }
    }

    /// Pairs a connected device: `Paired` and `Bonded` turn true.
    ///
    /// As bluetoothd 5.66 (`new_auth`): the agent is the caller's, else the default one; without
    /// either, pairing fails. How it is asked follows the IO-capability matrix (see
    /// `SimulatorCore+Agent.swift`); just works is accepted without asking (`device_confirm_passkey`
    /// with a bonding request). A refused or wrong answer fails with `AuthenticationFailed`.
    func completePairing(_ path: ObjectPath, attempt: Int) {
        guard let device = devices[path], let bonding = device.bonding, bonding.attempt == attempt, device.connected
        else {
            return
        }
        let caller = bonding.invocation.sender?.rawValue ?? ""
        guard let owner = agents[caller] != nil ? caller : defaultAgents.first else {
            return cancelBonding(path, error: BlueZErrors.make("AuthenticationFailed", "Authentication Failed"))
        }
        authenticate(path, agentOwner: owner, forPairCall: true) { accepted in
            guard let device = self.devices[path], device.bonding?.attempt == attempt, device.connected else { return }
            guard accepted else {
                return self.cancelBonding(
                    path, error: BlueZErrors.make("AuthenticationFailed", "Authentication Failed"))
            }
            self.markPaired(path)
            if !bonding.connectsFirst || device.servicesResolved {
                self.updateDevice(path) { $0.bonding = nil }
                self.reply(bonding.invocation)
            }
        }
    }

    /// Records a pairing and stores the bond.
    func markPaired(_ path: ObjectPath) {
        guard let device = devices[path], !device.paired else { return }
        updateDevice(path) { device in
            device.paired = true
            device.bonded = true
        }
        setTemporary(path, false, byPairing: true)
        propertiesChanged(path, Self.deviceInterface, ["Paired", "Bonded"])
        store(path)
    }

    /// Ends a `Pair` in progress with `error`.
    func cancelBonding(_ path: ObjectPath, error: DBusError) {
        guard let bonding = devices[path]?.bonding else { return }
        updateDevice(path) { $0.bonding = nil }
        cancelOpenAgentRequest(path)
        if bonding.connectsFirst, devices[path]?.pendingConnect == nil, devices[path]?.isConnecting == true {
            updateDevice(path) { $0.link = .idle }
        }
        reply(bonding.invocation, error: error)
    }

    /// Saves a bonded device the way bluetoothd writes `/var/lib/bluetooth/<adapter>/<device>/info`.
    func store(_ path: ObjectPath) {
        guard let device = devices[path], device.bonded, let adapter = adapters[device.adapterName] else { return }
        storage[adapter.address, default: [:]][device.address] = StoredDevice(
            address: device.address, addressType: device.addressType, name: device.name, alias: device.alias,
            trusted: device.trusted, blocked: device.blocked, gattUUIDs: device.gattUUIDs)
    }

    /// The devices bluetoothd loads from storage when an adapter appears.
    func loadStoredDevices(_ adapter: AdapterState) {
        for stored in (storage[adapter.address] ?? [:]).values.sorted(by: { $0.address < $1.address }) {
            let path = Self.devicePath(adapter: adapter.name, address: stored.address)
            var device = DeviceState(
                path: path, adapterName: adapter.name, address: stored.address, addressType: stored.addressType)
            device.name = stored.name
            device.alias = stored.alias
            device.trusted = stored.trusted
            device.blocked = stored.blocked
            device.paired = true
            device.bonded = true
            device.temporary = false
            device.gattUUIDs = stored.gattUUIDs
            devices[path] = device
            interfacesAdded(path, [Self.deviceInterface])
        }
    }

    // MARK: Removal

    /// Removes a device and its GATT objects (leaves first). Calls waiting on it get no reply,
    /// as in bluetoothd 5.66, except a `Pair`, which fails with `ConnectionAttemptFailed`.
    func removeDeviceObject(_ path: ObjectPath, forget: Bool) {
        guard let device = devices[path] else { return }
        cancelBonding(path, error: BlueZErrors.make("ConnectionAttemptFailed", "Page Timeout"))
        if let pending = device.pendingConnect { hold(pending) }
        device.pendingDisconnects.forEach(hold)
        removeGATTObjects(path)
        interfacesRemoved(path, [Self.deviceInterface])
        devices[path] = nil
        adapters[device.adapterName]?.discoveryFound[path] = nil
        if forget, let adapter = adapters[device.adapterName] {
            storage[adapter.address]?[device.address] = nil
        }
    }
}
