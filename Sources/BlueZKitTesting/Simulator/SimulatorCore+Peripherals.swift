internal import DBus

/// The radio side: peripherals joining an adapter's range, advertising, moving and dropping links.
extension SimulatorCore {
    /// Puts `peripheral` in range of adapter `name` with its GATT database laid out.
    func attach(_ peripheral: SimulatedPeripheral, adapter name: String) -> SimulatedBlueZError? {
        guard BluetoothText.address(peripheral.address) != nil else {
            return SimulatedBlueZError(.invalidConfiguration, "invalid address '\(peripheral.address)'")
        }
        for uuid in peripheral.serviceUUIDs + Array(peripheral.serviceData.keys) where BluetoothText.uuid(uuid) == nil {
            return SimulatedBlueZError(.invalidConfiguration, "invalid UUID '\(uuid)'")
        }
        let layout: GATTLayout
        do throws(SimulatedBlueZError) {
            layout = try GATTLayout.make(
                services: peripheral.services, standard: peripheral.includesStandardServices,
                deviceName: peripheral.name)
        } catch {
            return error
        }
        return run { () -> SimulatedBlueZError? in
            guard adapters[name] != nil else { return SimulatedBlueZError(.notFound, "no adapter \(name)") }
            let taken = peripheral.attachment.withLock { $0.core != nil }
            guard !taken else { return SimulatedBlueZError(.alreadyExists, "the peripheral was already added") }
            guard self.peripheral(adapter: name, address: peripheral.address) == nil else {
                return SimulatedBlueZError(
                    .alreadyExists, "a peripheral \(peripheral.address) is already in range of \(name)")
            }
            peripheral.attachment.withLock { attachment in
                attachment.core = self
                attachment.adapterName = name
                attachment.layout = layout
            }
            link(layout, to: peripheral)
            air[name, default: []].append(peripheral)
            if peripheral.isInRange { report(peripheral) }
            if let interval = peripheral.advertisingInterval { scheduleAdvertising(peripheral, every: interval) }
            return nil
        }
    }

    /// Takes `peripheral` out of range of its adapter for good and forgets it (its device stays).
    func detach(_ peripheral: SimulatedPeripheral) -> Bool {
        run { () -> Bool in
            guard let name = peripheral.attachment.withLock({ $0.core === self ? $0.adapterName : nil }) else {
                return false
            }
            if let path = devicePath(of: peripheral), devices[path]?.connected == true { linkLost(path, .timeout) }
            air[name]?.removeAll { $0 === peripheral }
            peripheral.attachment.withLock { attachment in
                attachment.core = nil
                attachment.adapterName = nil
            }
            return true
        }
    }

    /// Points the attributes of `layout` at their handles and object paths under `peripheral`.
    func link(_ layout: GATTLayout, to peripheral: SimulatedPeripheral) {
        for service in layout.services {
            let servicePath = "/" + service.pathElement
            service.object.link.attach(to: peripheral, handle: service.handle, pathSuffix: servicePath)
            for characteristic in service.characteristics {
                let characteristicPath = servicePath + "/" + characteristic.pathElement
                characteristic.object.link.attach(
                    to: peripheral, handle: characteristic.valueHandle, pathSuffix: characteristicPath)
                for descriptor in characteristic.descriptors {
                    descriptor.object.link.attach(
                        to: peripheral, handle: descriptor.handle,
                        pathSuffix: characteristicPath + "/" + descriptor.pathElement)
                }
            }
        }
    }

    /// Advertises every `interval` while attached and in range; the chain ends when bluetoothd restarts
    /// (and is started again for the new instance).
    func scheduleAdvertising(_ peripheral: SimulatedPeripheral, every interval: Duration) {
        after(interval) { [weak peripheral] in
            guard let peripheral, peripheral.attachment.withLock({ $0.core }) === self else { return }
            if peripheral.isInRange {
                self.report(peripheral)
                self.peripheralSeen(peripheral)
            }
            self.scheduleAdvertising(peripheral, every: interval)
        }
    }

    func advertise(_ peripheral: SimulatedPeripheral) {
        run {
            report(peripheral)
            peripheralSeen(peripheral)
        }
    }

    func rangeChanged(_ peripheral: SimulatedPeripheral) {
        run {
            if peripheral.isInRange {
                report(peripheral)
                peripheralSeen(peripheral)
            } else if let path = devicePath(of: peripheral), devices[path]?.connected == true {
                linkLost(path, .timeout)
            }
        }
    }

    func dropConnection(_ peripheral: SimulatedPeripheral, reason: String? = nil, message: String = "") {
        run {
            guard let path = devicePath(of: peripheral) else { return }
            linkLost(path, reason.map { .named($0, message) } ?? .remote)
        }
    }

    func isConnected(_ peripheral: SimulatedPeripheral) -> Bool {
        run { devicePath(of: peripheral).flatMap { devices[$0]?.connected } ?? false }
    }

    func adapterSnapshot(_ name: String) -> AdapterState.Snapshot? {
        run { adapters[name]?.snapshot }
    }
}
