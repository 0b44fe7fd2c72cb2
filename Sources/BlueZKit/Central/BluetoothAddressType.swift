/// Linux: the kind of a Bluetooth LE device address, as bluetoothd's `Device1.AddressType`
/// names it. Core Bluetooth hides addresses; BlueZ does not.
public enum BluetoothAddressType: String, Sendable, Hashable {
    /// A public address, assigned to the device's maker (IEEE): stays the same for ever.
    case `public`
    /// A random address: static (stays until the device's next power cycle, or for ever) or
    /// private (resolvable or not), which phones change every few minutes.
    case random
}
