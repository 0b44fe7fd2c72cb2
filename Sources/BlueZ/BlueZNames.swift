package import DBus

/// The names of BlueZ's D-Bus API (bluetoothd 5.66), in one place.
package enum BlueZNames {
    /// bluetoothd's well-known bus name.
    package static let service: BusName = "org.bluez"
    /// Where bluetoothd's adapters live (`/org/bluez/hci0`, …).
    package static let root: ObjectPath = try! ObjectPath("/org/bluez")

    package static let adapter: InterfaceName = "org.bluez.Adapter1"
    package static let device: InterfaceName = "org.bluez.Device1"
    package static let gattService: InterfaceName = "org.bluez.GattService1"
    package static let gattCharacteristic: InterfaceName = "org.bluez.GattCharacteristic1"
    package static let gattDescriptor: InterfaceName = "org.bluez.GattDescriptor1"
    package static let gattManager: InterfaceName = "org.bluez.GattManager1"
    package static let gattProfile: InterfaceName = "org.bluez.GattProfile1"
    package static let advertisingManager: InterfaceName = "org.bluez.LEAdvertisingManager1"
    package static let advertisement: InterfaceName = "org.bluez.LEAdvertisement1"
    package static let agentManager: InterfaceName = "org.bluez.AgentManager1"
    package static let agent: InterfaceName = "org.bluez.Agent1"
}
