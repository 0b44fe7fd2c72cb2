import BlueZ

/// Linux: a Bluetooth adapter of the machine, as bluetoothd reports it (`org.bluez.Adapter1`).
///
/// Core Bluetooth has one implicit adapter; on Linux a machine may have several (`hci0`,
/// `hci1`, …). A manager uses one, chosen with ``CentralManagerOptions/adapter`` (the first
/// by default).
public struct BluetoothAdapter: Sendable, Hashable, CustomStringConvertible {
    /// Its name, the last element of its object path: `"hci0"`.
    public let name: String
    /// Its Bluetooth address, `"AA:BB:CC:DD:EE:FF"` (`""` when bluetoothd gave none).
    public let address: String
    /// Whether it is powered (`Adapter1.Powered`).
    public let isPowered: Bool
    /// Whether the manager that listed it uses it.
    public let isInUse: Bool

    /// The name, address and power.
    public var description: String {
        "\(name) (\(address), \(isPowered ? "powered" : "off")\(isInUse ? ", in use" : ""))"
    }
}

extension BluetoothAdapter {
    /// What bluetoothd reported of the adapter.
    init(_ info: BlueZClient.AdapterInfo) {
        self.init(name: info.name, address: info.address, isPowered: info.isPowered, isInUse: info.isSelected)
    }
}
