internal import DBus

/// Fault injection and other deliberate misbehaviour.
extension SimulatorCore {
    /// The next fault for a call of `method` at `path`, counted down.
    func takeFault(for method: SimulatedMethod, at path: ObjectPath) -> SimulatedFault? {
        guard
            let index = faults.firstIndex(where: { $0.method == method && ($0.path == nil || $0.path == path.rawValue) }
            )
        else {
            return nil
        }
        let fault = faults[index].fault
        faults[index].remaining -= 1
        if faults[index].remaining <= 0 { faults.remove(at: index) }
        return fault
    }

    func inject(_ fault: SimulatedFault, for method: SimulatedMethod, count: Int, path: String?) {
        guard count > 0 else { return }
        run { faults.append(FaultRule(method: method, path: path, fault: fault, remaining: count)) }
    }

    func clearFaults() {
        run { faults.removeAll() }
    }

    /// How many injected misbehaviours have not fired yet.
    func unfiredFaultCount() -> Int {
        run {
            faults.reduce(0) { total, rule in
                let (sum, overflow) = total.addingReportingOverflow(rule.remaining)
                return overflow ? Int.max : sum
            }
        }
    }

    /// Sets or clears (`nil`) an override and announces the property as clients now see it.
    func overrideProperty(_ key: PropertyKey, _ override: SimulatedPropertyOverride?) {
        run {
            overrides[key] = override
            guard let path = try? ObjectPath(key.path) else { return }
            propertiesChanged(path, key.interface, [key.name])
        }
    }

    func clearOverrides() {
        run {
            let keys = overrides.keys.sorted { ($0.path, $0.interface, $0.name) < ($1.path, $1.interface, $1.name) }
            overrides.removeAll()
            for key in keys {
                guard let path = try? ObjectPath(key.path) else { continue }
                propertiesChanged(path, key.interface, [key.name])
            }
        }
    }

    /// The device vanishes from bluetoothd's cache (`InterfacesRemoved`), whatever it was doing.
    func vanish(_ peripheral: SimulatedPeripheral) -> Bool {
        run {
            guard let path = devicePath(of: peripheral) else { return false }
            removeDeviceObject(path, forget: true)
            return true
        }
    }

    // MARK: Adapters coming and going

    /// Adds an adapter (hot-plug): `InterfacesAdded` for it, then for the bonded devices bluetoothd reloads.
    func addAdapter(name: String, address: String, configuration: SimulatedAdapter.Configuration)
        -> SimulatedBlueZError?
    {
        run {
            guard adapters[name] == nil, !adapters.values.contains(where: { $0.address == address }) else {
                return SimulatedBlueZError(.alreadyExists, "an adapter \(name) or \(address) exists")
            }
            let adapter = AdapterState(name: name, address: address, configuration: configuration)
            adapters[name] = adapter
            interfacesAdded(adapter.path, interfaces(at: adapter.path))
            for source in adapters.keys.sorted() where source != name { refreshAdvertisingMirrors(source, only: name) }
            loadStoredDevices(adapter)
            return nil
        }
    }

    /// Removes an adapter (unplugged) as the kernel and bluetoothd do: the controller powers off
    /// first (the kernel's New Settings: `adapter_stop` ends every link, `Connected` false, and
    /// discovery), then, on Index Removed, its devices go, then the adapter; sessions are lost.
    /// Seen in bluetoothd 5.82's log under `removingTheCentralsAdapterEndsTheLinkAndItsReturnCompletesTheRequest`.
    func removeAdapter(name: String) -> Bool {
        run {
            guard let adapter = adapters[name] else { return false }
            setPowered(adapter: name, false)
            for path in devices.keys.sorted() where devices[path]?.adapterName == name {
                removeDeviceObject(path, forget: false)
            }
            interfacesRemoved(adapter.path, interfaces(at: adapter.path))
            applications.removeAll { $0.adapter == name }
            releaseAdvertisements(adapter: name)
            adapters[name] = nil
            return true
        }
    }

    /// Every adapter present, by index.
    func adapterList() -> [(name: String, address: String)] {
        run {
            adapters.values.sorted {
                $0.name.count < $1.name.count || ($0.name.count == $1.name.count && $0.name < $1.name)
            }
            .map { ($0.name, $0.address) }
        }
    }

    var uniqueName: String? { run { connection?.uniqueName?.rawValue } }
}
