import Locking

/// A simulated Bluetooth controller, served by the simulated bluetoothd as `org.bluez.Adapter1` at `/org/bluez/hciN`.
///
/// Get adapters from ``SimulatedBlueZ/adapters`` or
/// ``SimulatedBlueZ/addAdapter(_:)``. A handle stays valid across
/// ``SimulatedBlueZ/restart(downtime:)`` and across removing and re-adding
/// an adapter of the same name.
public final class SimulatedAdapter: Sendable {
    /// How a simulated adapter starts.
    public struct Configuration: Sendable, Hashable {
        /// The index name, `hci0`…; nil takes the next free `hciN`.
        public var name: String?
        /// The controller address; nil makes one up from the index (`00:AA:01:00:00:0N`).
        public var address: String?
        /// The system name (`Name`, the pretty hostname).
        public var systemName: String
        /// The class of device while powered (`Class`); bluetoothd shows 0 while powered off.
        public var deviceClass: UInt32
        /// Whether the adapter is powered when bluetoothd starts (as with `AutoEnable=true`).
        public var powered: Bool
        /// `Discoverable` at start.
        public var discoverable: Bool
        /// `Pairable` at start.
        public var pairable: Bool
        /// The local service UUIDs (`UUIDs`).
        public var uuids: [String]
        /// `Modalias`; nil leaves the property out.
        public var modalias: String?
        /// `Roles`.
        public var roles: [String]
        /// Whether the controller does BR/EDR as well as LE (dual mode, as most built-in
        /// controllers); false for an LE-only controller such as btvirt's. bluetoothd's scan type
        /// (`get_scan_type`) follows it, and with it the transport a discovery filter has by default.
        public var dualMode: Bool
        /// Whether the controller does extended advertising with LE 2M and Coded PHYs (as Bumble's),
        /// where btvirt's does legacy advertising only: bluetoothd then lists
        /// `SupportedSecondaryChannels` 1M, 2M and Coded, `SupportedFeatures` CanSetTxPower and
        /// HardwareOffload, a TX power range and `MaxAdvLen` 251, which 5.82 takes (5.66 still
        /// refuses more than 31 bytes).
        public var extendedAdvertising: Bool = false

        /// A configuration; every parameter has bluetoothd 5.66's usual value.
        public init(
            name: String? = nil, address: String? = nil, systemName: String = "BlueZ 5.66", deviceClass: UInt32 = 0,
            powered: Bool = true, discoverable: Bool = false, pairable: Bool = true,
            uuids: [String] = [
                "00001800-0000-1000-8000-00805f9b34fb", "00001801-0000-1000-8000-00805f9b34fb",
                "0000180a-0000-1000-8000-00805f9b34fb",
            ],
            modalias: String? = "usb:v1D6Bp0246d0542", roles: [String] = ["central", "peripheral"],
            dualMode: Bool = true
        ) {
            self.name = name
            self.address = address
            self.systemName = systemName
            self.deviceClass = deviceClass
            self.powered = powered
            self.discoverable = discoverable
            self.pairable = pairable
            self.uuids = uuids
            self.modalias = modalias
            self.roles = roles
            self.dualMode = dualMode
        }

        /// A powered adapter with a made-up name and address.
        public static let `default` = Configuration()
    }

    /// The index name, such as `hci0`.
    public let name: String
    /// The controller address.
    public let address: String
    private let coreReference: PosixMutex<WeakCore>

    struct WeakCore {
        weak var core: SimulatorCore?
    }

    init(name: String, address: String, core: SimulatorCore) {
        self.name = name
        self.address = address
        self.coreReference = PosixMutex(WeakCore(core: core))
    }

    private var core: SimulatorCore? { coreReference.withLock { $0.core } }

    /// The adapter's object path, `/org/bluez/hciN`.
    public var objectPath: String { "/org/bluez/" + name }

    /// Powers the adapter on or off, as `Powered` set by a settings application would.
    ///
    /// Off: `Powered` (and `Discovering`) turn false in one `PropertiesChanged`,
    /// every discovery session and filter is dropped, discovered devices lose
    /// their RSSI, and connections drop. On: `Powered` turns true.
    public func setPowered(_ powered: Bool) {
        core?.setPowered(adapter: name, powered)
    }

    /// Whether the adapter is powered.
    public var isPowered: Bool { core?.adapterSnapshot(name)?.powered ?? false }

    /// Whether the adapter is discovering.
    public var isDiscovering: Bool { core?.adapterSnapshot(name)?.discovering ?? false }

    /// Whether the adapter is present (not removed with ``SimulatedBlueZ/removeAdapter(_:)``).
    public var isPresent: Bool { core?.adapterSnapshot(name) != nil }

    /// How many clients hold a discovery session (`StartDiscovery` without `StopDiscovery`).
    public var discoverySessionCount: Int { core?.adapterSnapshot(name)?.sessions ?? 0 }

    /// The GATT applications registered on this adapter with `org.bluez.GattManager1.RegisterApplication`,
    /// oldest first (a registration whose tree bluetoothd is still reading is not listed).
    public var registeredApplications: [SimulatedGATTApplication] {
        core?.registeredApplications(adapter: name) ?? []
    }

    /// The advertisements registered on this adapter with `org.bluez.LEAdvertisingManager1.RegisterAdvertisement`,
    /// oldest first (a registration whose properties bluetoothd is still reading is not listed).
    public var registeredAdvertisements: [SimulatedAdvertisement] {
        core?.registeredAdvertisements(adapter: name) ?? []
    }

    /// The advertisement monitors registered and activated on this adapter with
    /// `org.bluez.AdvertisementMonitorManager1.RegisterMonitor`, oldest first (needs
    /// ``SimulatedBlueZ/Options/advertisementMonitor``).
    public var registeredMonitors: [SimulatedAdvertisementMonitor] {
        core?.registeredMonitors(adapter: name) ?? []
    }

    /// The object paths of the monitors bluetoothd called `Release` on (unregistered, or
    /// refused as invalid), in order.
    public var releasedMonitors: [String] {
        core?.releasedMonitorPaths(adapter: name) ?? []
    }
}
