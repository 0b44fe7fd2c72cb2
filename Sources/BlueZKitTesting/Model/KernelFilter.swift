/// The filter bluetoothd hands the kernel: every discovering client's filter merged
/// (`merge_discovery_filters`). Nil means a regular, unfiltered discovery.
struct KernelFilter: Sendable, Hashable {
    var transport: UInt8
    /// The lowest RSSI when every client set one; nil for no RSSI filtering.
    var rssi: Int16?
    /// The union of UUIDs, sorted; empty when any client wants any UUID.
    var uuids: [String]

    /// Merges the sessions' filters. As bluetoothd 5.67 and later (`mergesPlainFiltersAsRegular`),
    /// a filter that asks for nothing but the adapter's `scanType` counts as no filter.
    static func merge(
        _ filters: [DiscoveryFilter?], scanType: UInt8 = DiscoveryFilter.auto, mergesPlainFiltersAsRegular: Bool = false
    ) -> KernelFilter? {
        let filters = filters.map { filter in
            mergesPlainFiltersAsRegular && filter?.isRegular(scanType: scanType) == true ? nil : filter
        }
        guard filters.contains(where: { $0 != nil }) else { return nil }
        if filters.contains(where: { $0 == nil }) {
            // Regular and filtered discovery at once: clear the whole filter to report everything.
            return KernelFilter(transport: scanType, rssi: nil, uuids: [])
        }
        var transport: UInt8 = 0
        var rssi: Int16? = nil
        var anyWithoutRSSI = false
        var uuids = Set<String>()
        var anyWithoutUUIDs = false
        for case let filter? in filters {
            transport |= filter.transport
            if let value = filter.rssi { rssi = min(rssi ?? value, value) } else { anyWithoutRSSI = true }
            if filter.uuids.isEmpty { anyWithoutUUIDs = true }
            uuids.formUnion(filter.uuids)
        }
        return KernelFilter(
            transport: transport, rssi: anyWithoutRSSI ? nil : rssi, uuids: anyWithoutUUIDs ? [] : uuids.sorted())
    }

    /// Whether the kernel passes an LE advertisement with `uuids` at `rssi` up to bluetoothd.
    func passes(uuids advertised: [String], rssi received: Int16) -> Bool {
        guard transport & DiscoveryFilter.le != 0 else { return false }
        if let rssi, received < rssi { return false }
        return uuids.isEmpty || uuids.contains(where: advertised.contains)
    }
}
