import DBus

extension BlueZNames {
    /// On each LE adapter when bluetoothd runs with `--experimental` (`-E`) or `Experimental =
    /// true` in main.conf (`adapter_register` in src/adapter.c); absent otherwise.
    static let advertisementMonitorManager: InterfaceName = "org.bluez.AdvertisementMonitorManager1"
    static let advertisementMonitor: InterfaceName = "org.bluez.AdvertisementMonitor1"
}

/// What bluetoothd offers for advertisement monitors on the adapter in use
/// (`AdvertisementMonitorManager1`'s properties, doc/org.bluez.AdvertisementMonitorManager.rst).
package struct BlueZAdvertisementMonitorSupport: Sendable, Hashable {
    /// `SupportedMonitorTypes`: `or_patterns` in every release so far.
    package var monitorTypes: [String]
    /// `SupportedFeatures`: `controller-patterns` when the controller filters by itself.
    package var features: [String]

    package init(monitorTypes: [String], features: [String]) {
        self.monitorTypes = monitorTypes
        self.features = features
    }

    /// Whether `or_patterns` monitors, the only kind this layer makes, can be registered.
    package var supportsPatterns: Bool { monitorTypes.contains("or_patterns") }
}

extension BlueZClient {
    /// `AdvertisementMonitorManager1` on the adapter in use: nil when the adapter lacks it (no
    /// adapter, an adapter without LE, or bluetoothd without `--experimental`). On the queue.
    package var advertisementMonitorSupport: BlueZAdvertisementMonitorSupport? {
        guard let path = adapterPath,
            let manager = cache.properties(BlueZNames.advertisementMonitorManager, at: path)
        else { return nil }
        return BlueZAdvertisementMonitorSupport(
            monitorTypes: manager["SupportedMonitorTypes"]?.arrayValue?.compactMap(\.stringValue) ?? [],
            features: manager["SupportedFeatures"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }
}
