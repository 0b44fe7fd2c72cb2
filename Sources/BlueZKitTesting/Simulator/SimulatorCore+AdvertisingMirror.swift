/// The air between simulated adapters: what one adapter advertises (its registered advertisements)
/// reaches every other adapter of the simulator as a peripheral in range, through the same discovery
/// machinery as ``SimulatedPeripheral``s.
extension SimulatorCore {
    /// Updates the peripheral that stands for `source`'s advertising on every other adapter: in range
    /// with the merged data of its advertisements while it is powered and advertises, out of range otherwise.
    /// Each update is one advertisement on the air; `only` limits it to one receiving adapter.
    func refreshAdvertisingMirrors(_ source: String, only: String? = nil) {
        guard let adapter = adapters[source] else { return dropAdvertisingMirrors(source) }
        let registered = advertisements.filter { $0.adapter == source }.compactMap(\.advertisement)
        let advertising = adapter.powered && !registered.isEmpty
        for target in adapters.keys.sorted() where target != source && (only == nil || only == target) {
            let key = source + ">" + target
            guard advertising else {
                if let mirror = advertisingMirrors[key], mirror.isInRange {
                    mirror.attachment.withLock { $0.isInRange = false }
                    rangeChanged(mirror)
                }
                continue
            }
            let mirror =
                advertisingMirrors[key] ?? SimulatedPeripheral(address: adapter.address, includesStandardServices: true)
            mirror.advertisement.withLock { Self.merge(registered, from: adapter, into: &$0) }
            if advertisingMirrors[key] == nil {
                guard attach(mirror, adapter: target) == nil else { continue }
                advertisingMirrors[key] = mirror
            } else {
                mirror.attachment.withLock { $0.isInRange = true }
                rangeChanged(mirror)
            }
        }
    }

    /// Forgets the mirrors of a removed adapter (out of range everywhere) and the mirrors on it.
    func dropAdvertisingMirrors(_ adapter: String) {
        for key in advertisingMirrors.keys.sorted() {
            let parts = key.split(separator: ">").map(String.init)
            guard parts.first == adapter || parts.last == adapter, let mirror = advertisingMirrors[key] else {
                continue
            }
            if parts.first == adapter, mirror.isInRange {
                mirror.attachment.withLock { $0.isInRange = false }
                rangeChanged(mirror)
            }
        }
    }

    /// The advertising data on the air for `registered` advertisements of `adapter`, merged as a
    /// scanner that receives every instance merges them into one device.
    private static func merge(
        _ registered: [SimulatedAdvertisement], from adapter: AdapterState,
        into advertisement: inout SimulatedPeripheral.Advertisement
    ) {
        var uuids: [String] = []
        var manufacturerData: [UInt16: [UInt8]] = [:]
        var serviceData: [String: [UInt8]] = [:]
        var name: String?
        var appearance: UInt16?
        var discoverable = false
        var connectable = false
        for item in registered {
            uuids += item.serviceUUIDs.filter { !uuids.contains($0) }
            manufacturerData.merge(item.manufacturerData) { $1 }
            serviceData.merge(item.serviceData) { $1 }
            name = name ?? item.localName ?? (item.includes.contains("local-name") ? adapter.effectiveAlias : nil)
            appearance = appearance ?? item.appearance ?? (item.includes.contains("appearance") ? 0 : nil)
            let peripheral = item.type == "peripheral"
            connectable = connectable || peripheral
            // bluetoothd's Discoverable flag, or the kernel's for a peripheral while the adapter is discoverable.
            discoverable =
                discoverable || item.discoverable == true
                || (peripheral && item.discoverable == nil && adapter.discoverable)
        }
        advertisement.name = name
        advertisement.serviceUUIDs = uuids
        advertisement.manufacturerData = manufacturerData
        advertisement.serviceData = serviceData
        advertisement.appearance = appearance
        advertisement.isConnectable = connectable
        advertisement.flags = discoverable ? 0x06 : 0x04
    }
}
