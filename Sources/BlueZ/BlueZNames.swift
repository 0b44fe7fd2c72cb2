package import DBus

/// The names of BlueZ's D-Bus API (bluetoothd 5.66), in one place.
package enum BlueZNames {
    /// bluetoothd's well-known bus name.
    static let service: BusName = "org.bluez"
    /// Where bluetoothd's adapters live (`/org/bluez/hci0`, …).
    static let root: ObjectPath = try! ObjectPath("/org/bluez")

    package static let adapter: InterfaceName = "org.bluez.Adapter1"
    package static let device: InterfaceName = "org.bluez.Device1"
    static let gattService: InterfaceName = "org.bluez.GattService1"
    static let gattCharacteristic: InterfaceName = "org.bluez.GattCharacteristic1"
    static let gattDescriptor: InterfaceName = "org.bluez.GattDescriptor1"
    static let gattManager: InterfaceName = "org.bluez.GattManager1"
    static let gattProfile: InterfaceName = "org.bluez.GattProfile1"
    static let advertisingManager: InterfaceName = "org.bluez.LEAdvertisingManager1"
    static let advertisement: InterfaceName = "org.bluez.LEAdvertisement1"
    static let agentManager: InterfaceName = "org.bluez.AgentManager1"
    static let agent: InterfaceName = "org.bluez.Agent1"
    static let battery: InterfaceName = "org.bluez.Battery1"
}
