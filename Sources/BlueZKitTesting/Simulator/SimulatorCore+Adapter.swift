internal import DBus

/// `org.bluez.Adapter1`: its methods, its writable properties and powering.
extension SimulatorCore {
    func handleAdapterCall(
        _ invocation: DBusMethodInvocation, _ member: String, _ path: ObjectPath, _ arguments: [DBusValue],
        extraDelay: Duration = .zero
    ) {
        guard let adapter = adapter(at: path) else {
            return reply(invocation, error: BlueZErrors.unknownObject(path.rawValue))
        }
        let sender = invocation.sender?.rawValue ?? ""
        if member == "GetDiscoveryFilters" { return reply(invocation, [.stringArray(DiscoveryFilter.keys)]) }
        if member == "RemoveDevice" { return removeDeviceCall(invocation, adapter, arguments.first?.objectPathValue) }
        if member == "ConnectDevice" { return connectDeviceCall(invocation, adapter, arguments) }
        guard adapter.powered else { return reply(invocation, error: BlueZErrors.notReady) }
        switch member {
        case "StartDiscovery":
            if let client = adapter.clients.first(where: { $0.owner == sender }), client.discovering {
                return reply(invocation, error: BlueZErrors.busy)
            }
            // The session is registered when the call arrives, whenever it is answered.
            let pending = extraDelay > .zero
            updateAdapter(adapter.name) { adapter in
                if let index = adapter.clients.firstIndex(where: { $0.owner == sender }) {
                    adapter.clients[index].discovering = true
                    adapter.clients[index].startPending = pending
                } else {
                    adapter.clients.append(.init(owner: sender, filter: nil, discovering: true, startPending: pending))
                }
            }
            guard pending else { return updateDiscovery(adapter.name, replyTo: invocation) }
            after(extraDelay) { self.answerLateStart(adapter.name, client: sender, invocation) }
        case "StopDiscovery":
            guard let client = adapter.clients.first(where: { $0.owner == sender && $0.discovering }) else {
                return reply(invocation, error: BlueZErrors.failed("No discovery started"))
            }
            // `stop_discovery` refuses a session whose start is still unanswered.
            if client.startPending { return reply(invocation, error: BlueZErrors.busy) }
            stopDiscovery(adapter.name, client: sender, replyTo: invocation)
        case "SetDiscoveryFilter":
            let parsed = DiscoveryFilter.parse(arguments.first ?? .bool(false), scanType: adapter.scanType)
            let filter: DiscoveryFilter?
            switch parsed {
            case .invalid: return reply(invocation, error: BlueZErrors.invalidArguments())
            case .cleared: filter = nil
            case .filter(let value): filter = value
            }
            let index = adapter.clients.firstIndex { $0.owner == sender }
            let discovering = index.map { adapter.clients[$0].discovering } ?? false
            updateAdapter(adapter.name) { adapter in
                if let index {
                    if filter == nil && !discovering {
                        adapter.clients.remove(at: index)  // removing a pre-set filter
                    } else {
                        adapter.clients[index].filter = filter
                    }
                } else if filter != nil {
                    adapter.clients.append(.init(owner: sender, filter: filter, discovering: false))
                }
            }
            if discovering { updateDiscovery(adapter.name, replyTo: nil) }
            reply(invocation)
        default:
            reply(invocation, error: BlueZErrors.notSupported)
        }
    }

    /// A `StartDiscovery` that a `.delay` fault held (a slow kernel start): the scan starts and
    /// the call is answered now, as `start_discovery_complete` does. A client that left meanwhile
    /// took its session with it (its reply then goes nowhere).
    private func answerLateStart(_ name: String, client owner: String, _ invocation: DBusMethodInvocation) {
        updateAdapter(name) { adapter in
            guard let index = adapter.clients.firstIndex(where: { $0.owner == owner }) else { return }
            adapter.clients[index].startPending = false
        }
        updateDiscovery(name, replyTo: invocation)
    }

    /// Applies a change to an adapter's state.
    func updateAdapter(_ name: String, _ body: (inout AdapterState) -> Void) {
        guard var adapter = adapters[name] else { return }
        body(&adapter)
        adapters[name] = adapter
    }

    private func removeDeviceCall(_ invocation: DBusMethodInvocation, _ adapter: AdapterState, _ target: ObjectPath?) {
        guard let target else { return reply(invocation, error: BlueZErrors.invalidArguments()) }
        guard let device = devices[target], device.adapterName == adapter.name else {
            return reply(invocation, error: BlueZErrors.doesNotExist)
        }
        guard adapter.powered else { return reply(invocation, error: BlueZErrors.notReady) }
        setTemporary(target, true)
        if device.connected {
            requestDisconnect(target, replyTo: invocation, removing: true)
        } else {
            cancelConnectAttempt(target, error: BlueZErrors.failed("br-connection-canceled"))
            removeDeviceObject(target, forget: true)
            reply(invocation)
        }
    }

    // MARK: Properties

    func setAdapterProperty(_ invocation: DBusMethodInvocation, _ path: ObjectPath, _ name: String, _ value: DBusValue)
    {
        guard let adapter = adapter(at: path) else { return }
        switch name {
        case "Powered":
            reply(invocation)
            setPowered(adapter: adapter.name, value.boolValue ?? adapter.powered)
        case "Discoverable":
            guard adapter.powered else { return reply(invocation, error: BlueZErrors.notReady) }
            reply(invocation)
            setAdapterFlag(adapter.name, "Discoverable", value.boolValue ?? false) { $0.discoverable = $1 }
        case "Pairable":
            reply(invocation)
            setAdapterFlag(adapter.name, "Pairable", value.boolValue ?? false) { $0.pairable = $1 }
        case "Alias":
            reply(invocation)
            let alias = value.stringValue ?? ""
            updateAdapter(adapter.name) { $0.alias = alias.isEmpty ? nil : alias }
            propertiesChanged(path, Self.adapterInterface, ["Alias"])
        case "DiscoverableTimeout", "PairableTimeout":
            reply(invocation)
            let seconds = value.uint32Value ?? 0
            updateAdapter(adapter.name) { adapter in
                if name == "PairableTimeout" {
                    adapter.pairableTimeout = seconds
                } else {
                    adapter.discoverableTimeout = seconds
                }
            }
            propertiesChanged(path, Self.adapterInterface, [name])
        default:
            reply(invocation, error: DBusError(.propertyReadOnly, "Property '\(name)' is not writable"))
        }
    }

    private func setAdapterFlag(
        _ adapter: String, _ property: String, _ value: Bool, _ apply: (inout AdapterState, Bool) -> Void
    ) {
        guard let state = adapters[adapter] else { return }
        let current = property == "Discoverable" ? state.discoverable : state.pairable
        guard current != value else { return }
        updateAdapter(adapter) { apply(&$0, value) }
        propertiesChanged(state.path, Self.adapterInterface, [property])
    }

    // MARK: Power

    /// Powers an adapter on or off as bluetoothd's `settings_changed` and `adapter_stop` do.
    func setPowered(adapter name: String, _ powered: Bool) {
        run {
            guard let adapter = adapters[name], adapter.powered != powered else { return }
            var changed = ["Powered"]
            updateAdapter(name) { $0.powered = powered }
            refreshAdvertisingMirrors(name)
            if adapter.configuration.deviceClass != 0 { changed.append("Class") }
            if powered {
                propertiesChanged(adapter.path, Self.adapterInterface, changed)
                return
            }
            propertiesChanged(adapter.path, Self.adapterInterface, ["Powered"])
            let wasDiscovering = adapter.discovering
            updateAdapter(name) { adapter in
                adapter.clients.removeAll()
                adapter.discovering = false
                adapter.kernelFilter = nil
                if adapter.discoverable { adapter.discoverable = false }
                adapter.discoverableForDiscovery = false
            }
            if wasDiscovering { discoveryCleanup(name) }
            for path in devices.keys.sorted() where devices[path]?.adapterName == name {
                let abort = BlueZErrors.failed("le-connection-abort-by-local")
                cancelConnectAttempt(path, error: abort)
                cancelBonding(path, error: BlueZErrors.make("AuthenticationCanceled", "Authentication Canceled"))
                if devices[path]?.connected == true { linkLost(path, .unknown) }
            }
            changed.append("Discovering")
            if adapter.discoverable { changed.append("Discoverable") }
            propertiesChanged(adapter.path, Self.adapterInterface, changed)
        }
    }
}
