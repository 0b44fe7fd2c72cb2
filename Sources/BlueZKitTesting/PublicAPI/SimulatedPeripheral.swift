import Locking

/// A virtual LE peripheral in radio range of a simulated adapter: what it advertises and its GATT database.
///
/// Create one, then hand it to ``SimulatedBlueZ/addPeripheral(_:to:)``.
/// While the adapter discovers, the peripheral is reported when discovery
/// starts and each time you call ``advertise()`` (or every
/// ``advertisingInterval``, if set). Changing an advertising property takes
/// effect with the next advertisement, as on the air. A peripheral out of
/// range (``setInRange(_:)``) is neither discovered nor connectable: a
/// `Connect` then waits, and fails after the configured connect timeout.
///
/// The peripheral's state is safe to read and change from any thread.
public final class SimulatedPeripheral: Sendable {
    /// The advertising data, as the next advertisement carries it.
    struct Advertisement: Sendable {
        var name: String?
        var rssi: Int16
        var txPower: Int16?
        var serviceUUIDs: [String]
        var manufacturerData: [UInt16: [UInt8]]
        var serviceData: [String: [UInt8]]
        var flags: UInt8
        var isConnectable: Bool
        var appearance: UInt16?
    }

    /// Where the peripheral lives once added to a simulator. Its GATT layout is fixed then.
    struct Attachment {
        weak var core: SimulatorCore?
        var adapterName: String?
        var layout: GATTLayout?
        var isInRange = true
    }

    /// The device address, `AA:BB:CC:DD:EE:FF` (upper case once added).
    public let address: String
    /// Public or random.
    public let addressType: SimulatedAddressType
    /// The GATT services, in handle order (after the standard ones).
    ///
    /// Change them with ``addService(_:)``, ``removeService(uuid:)`` and ``replaceService(uuid:with:)``.
    public var services: [SimulatedService] { database.withLock { $0 } }
    /// Whether the database starts with the GAP (`1800`, which bluetoothd exports only from 5.80, read-only) and GATT (`1801`) services.
    public let includesStandardServices: Bool
    /// The largest ATT MTU the peripheral accepts; the exchanged MTU is the smaller of this and bluetoothd's 517.
    public let maximumMTU: UInt16
    /// When set, the peripheral advertises on its own at this interval while it is in range.
    public let advertisingInterval: Duration?
    /// What the peripheral can show and read for LE pairing; with the pairing agent's capability
    /// it decides how a pairing is authenticated (see ``IOCapability``). Default: none (just works).
    public let ioCapability: IOCapability
    /// The six-digit passkey of passkey-entry pairing (shown on whichever side displays) and the
    /// value of numeric comparison; a passkey typed into the agent must equal it.
    public let passkey: UInt32
    let advertisement: PosixMutex<Advertisement>
    let attachment = PosixMutex(Attachment())
    /// The services of the GATT database (the simulator's queue commits changes while attached).
    let database: PosixMutex<[SimulatedService]>

    /// A peripheral with its advertising data and GATT database.
    ///
    /// - Parameters:
    ///   - address: `AA:BB:CC:DD:EE:FF`.
    ///   - advertisingFlags: the AD Flags byte; `0x06` is LE General Discoverable with BR/EDR not supported.
    ///     Without a discoverable bit the peripheral is found only by a filtered discovery, as in BlueZ.
    ///   - serviceUUIDs, serviceData: UUIDs in 16-, 32- or 128-bit form.
    ///   - ioCapability, passkey: how the peripheral takes part in pairing (see ``ioCapability``).
    public init(
        address: String, addressType: SimulatedAddressType = .public, name: String? = nil, rssi: Int16 = -60,
        txPower: Int16? = nil, serviceUUIDs: [String] = [], manufacturerData: [UInt16: [UInt8]] = [:],
        serviceData: [String: [UInt8]] = [:], advertisingFlags: UInt8 = 0x06, isConnectable: Bool = true,
        appearance: UInt16? = nil, services: [SimulatedService] = [], includesStandardServices: Bool = true,
        maximumMTU: UInt16 = 517, advertisingInterval: Duration? = nil,
        ioCapability: IOCapability = .noInputNoOutput, passkey: UInt32 = 123_456
    ) {
        self.ioCapability = ioCapability
        self.passkey = passkey % 1_000_000
        self.address = BluetoothText.address(address) ?? address
        self.addressType = addressType
        self.database = PosixMutex(services)
        self.includesStandardServices = includesStandardServices
        self.maximumMTU = maximumMTU
        self.advertisingInterval = advertisingInterval
        self.advertisement = PosixMutex(
            Advertisement(
                name: name, rssi: rssi, txPower: txPower, serviceUUIDs: serviceUUIDs,
                manufacturerData: manufacturerData, serviceData: serviceData, flags: advertisingFlags,
                isConnectable: isConnectable, appearance: appearance))
    }

    // MARK: Advertising data

    /// The local name advertised (and shown as the GAP Device Name).
    public var name: String? {
        get { advertisement.withLock { $0.name } }
        set { advertisement.withLock { $0.name = newValue } }
    }
    /// The signal strength the adapter receives, in dBm.
    public var rssi: Int16 {
        get { advertisement.withLock { $0.rssi } }
        set { advertisement.withLock { $0.rssi = newValue } }
    }
    /// The advertised TX power level, if any.
    public var txPower: Int16? {
        get { advertisement.withLock { $0.txPower } }
        set { advertisement.withLock { $0.txPower = newValue } }
    }
    /// The advertised service UUIDs.
    public var serviceUUIDs: [String] {
        get { advertisement.withLock { $0.serviceUUIDs } }
        set { advertisement.withLock { $0.serviceUUIDs = newValue } }
    }
    /// Manufacturer-specific data by company identifier.
    public var manufacturerData: [UInt16: [UInt8]] {
        get { advertisement.withLock { $0.manufacturerData } }
        set { advertisement.withLock { $0.manufacturerData = newValue } }
    }
    /// Service data by service UUID.
    public var serviceData: [String: [UInt8]] {
        get { advertisement.withLock { $0.serviceData } }
        set { advertisement.withLock { $0.serviceData = newValue } }
    }
    /// The AD Flags byte.
    public var advertisingFlags: UInt8 {
        get { advertisement.withLock { $0.flags } }
        set { advertisement.withLock { $0.flags = newValue } }
    }
    /// Whether the advertisements are connectable (a non-connectable peripheral refuses `Connect`).
    public var isConnectable: Bool {
        get { advertisement.withLock { $0.isConnectable } }
        set { advertisement.withLock { $0.isConnectable = newValue } }
    }
    /// The advertised GAP appearance, if any.
    public var appearance: UInt16? {
        get { advertisement.withLock { $0.appearance } }
        set { advertisement.withLock { $0.appearance = newValue } }
    }

    // MARK: Radio

    /// Sends one advertisement now: while the adapter discovers, bluetoothd processes it as one report.
    public func advertise() {
        guard let core = attachment.withLock({ $0.core }) else { return }
        core.advertise(self)
    }

    /// Whether the peripheral is in radio range of its adapter.
    public var isInRange: Bool { attachment.withLock { $0.isInRange } }

    /// Moves the peripheral into or out of range.
    ///
    /// Coming into range completes a `Connect` that waits for it (and
    /// advertises once). Going out of range drops a connection, as a
    /// supervision timeout does (as 5.87, with `Device1.Disconnected` `org.bluez.Reason.Timeout`).
    public func setInRange(_ inRange: Bool) {
        let core = attachment.withLock { attachment -> SimulatorCore? in
            attachment.isInRange = inRange
            return attachment.core
        }
        core?.rangeChanged(self)
    }

    /// Drops the connection from the peripheral's side (link loss): `Connected` turns false without a
    /// `Disconnect`. As ``SimulatedBlueZ/Version/bluez5_87``, `Device1.Disconnected` comes first
    /// with `org.bluez.Reason.Remote`, what bluetoothd says when the peripheral ends the link.
    public func dropConnection() {
        attachment.withLock { $0.core }?.dropConnection(self)
    }

    /// Drops the connection from the peripheral's side as ``dropConnection()`` does, with the
    /// `Device1.Disconnected(reason, message)` that bluetoothd 5.83 and later send first given
    /// here: `reason` is a name such as `org.bluez.Reason.Timeout`, or one bluetoothd does not
    /// send, for bad-input tests. Only ``SimulatedBlueZ/Version/bluez5_87`` sends the signal, as
    /// the older releases send none.
    public func dropConnection(reason: String, message: String = "") {
        attachment.withLock { $0.core }?.dropConnection(self, reason: reason, message: message)
    }

    /// Whether bluetoothd is connected to the peripheral.
    public var isConnected: Bool {
        guard let core = attachment.withLock({ $0.core }) else { return false }
        return core.isConnected(self)
    }

    /// Stores `value` in `characteristic` and notifies the central if subscribed; see ``SimulatedCharacteristic/notify(_:)``.
    @discardableResult
    public func updateValue(_ value: [UInt8], for characteristic: SimulatedCharacteristic) -> Bool {
        guard characteristic.link.peripheral === self else { return false }
        return characteristic.notify(value)
    }

    /// The object path of the peripheral's `org.bluez.Device1`, once added to an adapter.
    public var devicePath: String? {
        guard let adapter = attachment.withLock({ $0.adapterName }) else { return nil }
        return "/org/bluez/\(adapter)/" + BluetoothText.deviceElement(address)
    }

    // MARK: GATT database

    /// Adds `service` after the existing ones.
    ///
    /// While connected with services resolved, bluetoothd exports the new
    /// service as BlueZ 5.66 does after a Service Changed indication: one
    /// `InterfacesAdded` per object (the service, then each characteristic
    /// followed by its descriptors), `Device1.UUIDs` changing when a new UUID
    /// appears, and `ServicesResolved` staying true. The database stays
    /// changed for later connections.
    ///
    /// - Throws: ``SimulatedBlueZError`` `.invalidConfiguration` for an invalid UUID, flag or include.
    public func addService(_ service: SimulatedService) throws(SimulatedBlueZError) {
        try changeDatabase { $0 + [service] }
    }

    /// Removes the services with `uuid` (16-, 32- or 128-bit form).
    ///
    /// While connected, bluetoothd unregisters their objects as BlueZ 5.66's
    /// `unregister_service` does: per characteristic its descriptors, then the
    /// characteristic, the service last, one `InterfacesRemoved` each;
    /// `Device1.UUIDs` changes when no other service has the UUID;
    /// `ServicesResolved` stays true. Services after a removed one keep their
    /// handles and object paths.
    ///
    /// - Throws: ``SimulatedBlueZError`` `.notFound` when no service has `uuid`.
    public func removeService(uuid: String) throws(SimulatedBlueZError) {
        let target = BluetoothText.uuid(uuid)
        try changeDatabase { (services) throws(SimulatedBlueZError) -> [SimulatedService] in
            let kept = services.filter { BluetoothText.uuid($0.uuid) != target }
            guard target != nil, kept.count < services.count else {
                throw SimulatedBlueZError(.notFound, "no service \(uuid)")
            }
            return kept
        }
    }

    /// Replaces the services with `uuid` by `service`, at the place of the first one, in one database change:
    /// the removals of ``removeService(uuid:)``, then the additions of ``addService(_:)``.
    ///
    /// - Throws: ``SimulatedBlueZError`` `.notFound` when no service has `uuid`, `.invalidConfiguration`
    ///   when `service` is invalid.
    public func replaceService(uuid: String, with service: SimulatedService) throws(SimulatedBlueZError) {
        let target = BluetoothText.uuid(uuid)
        try changeDatabase { (services) throws(SimulatedBlueZError) -> [SimulatedService] in
            guard target != nil, let index = services.firstIndex(where: { BluetoothText.uuid($0.uuid) == target })
            else { throw SimulatedBlueZError(.notFound, "no service \(uuid)") }
            var changed = services.filter { BluetoothText.uuid($0.uuid) != target }
            changed.insert(service, at: min(index, changed.count))
            return changed
        }
    }

    /// Applies `change` to the service list: through the simulator when attached, else directly.
    private func changeDatabase(
        _ change: ([SimulatedService]) throws(SimulatedBlueZError) -> [SimulatedService]
    ) throws(SimulatedBlueZError) {
        let services = try change(self.services)
        if let core = attachment.withLock({ $0.core }) {
            if let error = core.changeDatabase(of: self, to: services) { throw error }
            return
        }
        _ = try GATTLayout.make(services: services, standard: includesStandardServices, deviceName: name)
        database.withLock { $0 = services }
    }

    // MARK: Internal

    var layout: GATTLayout? { attachment.withLock { $0.layout } }

    func deliverNotification(_ value: [UInt8], handle: UInt16) -> Bool {
        guard let core = attachment.withLock({ $0.core }) else { return false }
        return core.notify(self, handle: handle, value: value)
    }

    func isSubscribed(handle: UInt16) -> Bool {
        guard let core = attachment.withLock({ $0.core }) else { return false }
        return core.isSubscribed(self, handle: handle)
    }
}

extension SimulatedPeripheral {
    /// An LE IO capability (Core Specification Vol 3 Part H, 2.3.2), named as BlueZ's agents name theirs.
    public enum IOCapability: String, Sendable, Hashable, CaseIterable {
        case displayOnly = "DisplayOnly"
        case displayYesNo = "DisplayYesNo"
        case keyboardOnly = "KeyboardOnly"
        case noInputNoOutput = "NoInputNoOutput"
        case keyboardDisplay = "KeyboardDisplay"
    }
}
