/// A method of the simulated bluetoothd that faults can be injected into: an interface and member name.
public struct SimulatedMethod: Sendable, Hashable, CustomStringConvertible {
    /// The D-Bus interface, such as `org.bluez.Device1`.
    public let interface: String
    /// The method name, such as `Connect`.
    public let member: String

    /// Any method, by interface and member name.
    public init(interface: String, member: String) {
        self.interface = interface
        self.member = member
    }

    /// `interface.member`.
    public var description: String { interface + "." + member }

    static let adapter = "org.bluez.Adapter1"
    static let device = "org.bluez.Device1"
    static let characteristic = "org.bluez.GattCharacteristic1"
    static let descriptor = "org.bluez.GattDescriptor1"

    /// `org.bluez.Adapter1.StartDiscovery`.
    public static let startDiscovery = SimulatedMethod(interface: adapter, member: "StartDiscovery")
    /// `org.bluez.Adapter1.StopDiscovery`.
    public static let stopDiscovery = SimulatedMethod(interface: adapter, member: "StopDiscovery")
    /// `org.bluez.Adapter1.SetDiscoveryFilter`.
    public static let setDiscoveryFilter = SimulatedMethod(interface: adapter, member: "SetDiscoveryFilter")
    /// `org.bluez.Adapter1.GetDiscoveryFilters`.
    public static let getDiscoveryFilters = SimulatedMethod(interface: adapter, member: "GetDiscoveryFilters")
    /// `org.bluez.Adapter1.RemoveDevice`.
    public static let removeDevice = SimulatedMethod(interface: adapter, member: "RemoveDevice")
    /// `org.bluez.Device1.Connect`.
    public static let connect = SimulatedMethod(interface: device, member: "Connect")
    /// `org.bluez.Device1.Disconnect`.
    public static let disconnect = SimulatedMethod(interface: device, member: "Disconnect")
    /// `org.bluez.Device1.Pair`.
    public static let pair = SimulatedMethod(interface: device, member: "Pair")
    /// `org.bluez.Device1.CancelPairing`.
    public static let cancelPairing = SimulatedMethod(interface: device, member: "CancelPairing")
    /// `org.bluez.GattCharacteristic1.ReadValue`.
    public static let readValue = SimulatedMethod(interface: characteristic, member: "ReadValue")
    /// `org.bluez.GattCharacteristic1.WriteValue`.
    public static let writeValue = SimulatedMethod(interface: characteristic, member: "WriteValue")
    /// `org.bluez.GattCharacteristic1.StartNotify`.
    public static let startNotify = SimulatedMethod(interface: characteristic, member: "StartNotify")
    /// `org.bluez.GattCharacteristic1.StopNotify`.
    public static let stopNotify = SimulatedMethod(interface: characteristic, member: "StopNotify")
    /// `org.bluez.GattDescriptor1.ReadValue`.
    public static let readDescriptorValue = SimulatedMethod(interface: descriptor, member: "ReadValue")
    /// `org.bluez.GattDescriptor1.WriteValue`.
    public static let writeDescriptorValue = SimulatedMethod(interface: descriptor, member: "WriteValue")
    /// `org.freedesktop.DBus.ObjectManager.GetManagedObjects` (at `/`).
    public static let getManagedObjects = SimulatedMethod(
        interface: "org.freedesktop.DBus.ObjectManager", member: "GetManagedObjects")
    /// `org.freedesktop.DBus.Properties.Get`.
    public static let getProperty = SimulatedMethod(interface: "org.freedesktop.DBus.Properties", member: "Get")
    /// `org.freedesktop.DBus.Properties.GetAll`.
    public static let getAllProperties = SimulatedMethod(interface: "org.freedesktop.DBus.Properties", member: "GetAll")
    /// `org.freedesktop.DBus.Properties.Set`.
    public static let setProperty = SimulatedMethod(interface: "org.freedesktop.DBus.Properties", member: "Set")
}
