import DBus

/// Every adapter bluetoothd has, not only the one a manager uses.
extension BlueZClient {
    /// What bluetoothd reports of one adapter (`Adapter1`).
    package struct AdapterInfo: Sendable, Hashable {
        /// The last element of its object path: `hci0`.
        package let name: String
        /// `Adapter1.Address`, `""` when bluetoothd gave none.
        package let address: String
        /// `Adapter1.Powered`.
        package let isPowered: Bool
        /// Whether this client uses it.
        package let isSelected: Bool
    }

    /// The adapters in bluetoothd's object tree, by name (on the queue).
    package var adapters: [AdapterInfo] {
        cache.paths(with: BlueZNames.adapter).sorted().map { path in
            let properties = cache.properties(BlueZNames.adapter, at: path) ?? [:]
            return AdapterInfo(
                name: String(path.rawValue.split(separator: "/").last ?? ""),
                address: properties["Address"]?.stringValue ?? "",
                isPowered: properties["Powered"]?.boolValue ?? false, isSelected: path == adapterPath)
        }
    }
}
