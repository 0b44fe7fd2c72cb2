/// A GATT application registered with the simulated bluetoothd through `org.bluez.GattManager1.RegisterApplication`.
///
/// bluetoothd reads the application's object tree once, with
/// `GetManagedObjects`, before it answers the registration; this is what it
/// read. Get the applications of an adapter from
/// ``SimulatedAdapter/registeredApplications`` and act on them as a remote
/// device would with a ``SimulatedCentral``.
public struct SimulatedGATTApplication: Sendable, Hashable {
    /// A descriptor of a registered characteristic (`org.bluez.GattDescriptor1`).
    public struct Descriptor: Sendable, Hashable {
        /// The object path of the descriptor in the application's tree.
        public var path: String
        /// The descriptor's UUID, in its 128-bit lowercase form.
        public var uuid: String
        /// The descriptor's `Flags`, as the application listed them.
        public var flags: [String]
    }

    /// A characteristic of a registered service (`org.bluez.GattCharacteristic1`).
    public struct Characteristic: Sendable, Hashable {
        /// The object path of the characteristic in the application's tree.
        public var path: String
        /// The characteristic's UUID, in its 128-bit lowercase form.
        public var uuid: String
        /// The characteristic's `Flags`, as the application listed them.
        public var flags: [String]
        /// Its descriptors, in object-path order.
        public var descriptors: [Descriptor]
        /// Whether it has the `NotifyAcquired` property: bluetoothd then asks for a socket with
        /// `AcquireNotify` when the first central subscribes, instead of calling `StartNotify`.
        public var offersAcquireNotify = false
    }

    /// A service of a registered application (`org.bluez.GattService1`).
    public struct Service: Sendable, Hashable {
        /// The object path of the service in the application's tree.
        public var path: String
        /// The service's UUID, in its 128-bit lowercase form.
        public var uuid: String
        /// Whether the service is primary (`Primary`).
        public var isPrimary: Bool
        /// Its characteristics, in object-path order.
        public var characteristics: [Characteristic]
        /// The object paths of the services it includes (`Includes`), as bluetoothd 5.66 resolved
        /// them: only services of this application that come before it in the application's
        /// `GetManagedObjects` reply (or itself); other entries are skipped, as bluetoothd does.
        public var includes: [String]
    }

    /// The unique bus name of the application's connection (the caller of `RegisterApplication`).
    public var owner: String
    /// The application's root: the object path passed to `RegisterApplication`.
    public var path: String
    /// The services, in object-path order.
    public var services: [Service]

    /// The UUIDs of the services, in object-path order.
    public var serviceUUIDs: [String] { services.map(\.uuid) }

    /// The service at `path` in the application's tree, if registered.
    public func service(path: String) -> Service? {
        services.first { $0.path == path }
    }

    /// The characteristic `characteristicUUID` of the service `serviceUUID` (16-, 32- or 128-bit forms), if registered.
    public func characteristic(serviceUUID: String, characteristicUUID: String) -> Characteristic? {
        guard let service = BluetoothText.uuid(serviceUUID), let characteristic = BluetoothText.uuid(characteristicUUID)
        else {
            return nil
        }
        return services.first { $0.uuid == service && $0.characteristics.contains { $0.uuid == characteristic } }?
            .characteristics.first { $0.uuid == characteristic }
    }
}
