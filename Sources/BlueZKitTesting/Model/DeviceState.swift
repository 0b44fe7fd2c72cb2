internal import DBus

/// One remote device as the simulated bluetoothd holds it (`struct btd_device`).
struct DeviceState: Sendable {
    /// Where the link stands.
    enum Link: Sendable, Equatable {
        case idle
        /// A `Connect` (or a `Pair` that connects) is waiting for the peripheral.
        case connecting(attempt: Int)
        /// Connected; services may or may not be resolved yet.
        case connected(generation: Int)
    }

    /// A `Pair` in progress (`struct bonding_req`).
    struct Bonding: Sendable {
        let invocation: DBusMethodInvocation
        let attempt: Int
        /// Whether `Pair` connected the device itself (then it replies once services are resolved).
        var connectsFirst: Bool
    }

    let path: ObjectPath
    let adapterName: String
    let address: String
    let addressType: SimulatedAddressType
    var name: String?
    var alias: String?
    var appearance: UInt16?
    var paired = false
    var bonded = false
    var trusted = false
    var blocked = false
    var rssi: Int16?
    var txPower: Int16?
    var connected = false
    var servicesResolved = false
    /// The bearer's `svc_resolved`: services were discovered (kept while disconnected with a GATT cache).
    var gattKnown = false
    var eirUUIDs: [String] = []
    /// The advertised UUIDs that went into bluetoothd's profile list (`device->uuids`): from 5.69
    /// every one it collected (`device_add_eir_uuids` → `device_probe_profiles`), kept after a
    /// resolution; none in 5.66.
    var collectedUUIDs: [String] = []
    var gattUUIDs: [String] = []
    var manufacturerData: [UInt16: [UInt8]] = [:]
    var serviceData: [String: [UInt8]] = [:]
    /// The last AD Flags seen; nil until an advertisement was (`INVALID_FLAGS`).
    var advertisingFlags: UInt8?
    /// Not yet connected or paired: removed when a non-connectable one's discovery ends, and by the
    /// temporary timer (`SimulatorCore+TemporaryDevices.swift`).
    var temporary = true
    var lastSeenConnectable = true
    /// When the temporary timer removes the device (`temporary_timer`); nil while none runs.
    var temporaryDeadline: ContinuousClock.Instant?
    /// Exported GATT objects, in the order they were exported.
    var gattPaths: [ObjectPath] = []
    var mtu: UInt16 = 23
    var link = Link.idle
    var pendingConnect: DBusMethodInvocation?
    var pendingDisconnects: [DBusMethodInvocation] = []
    var bonding: Bonding?
    /// The peripheral's CCCD values by characteristic value handle, for this connection.
    var clientConfigurations: [UInt16: UInt16] = [:]
    /// bluetoothd's battery plugin on this connection (`SimulatorCore+Battery.swift`): the Battery
    /// Level's value handle it subscribed to, and whether `Battery1` is exported.
    var batteryLevelHandle: UInt16?
    var batteryExported = false
    /// `Battery1.Percentage` (absent until a level of 0 to 100 was read or notified).
    var batteryPercentage: UInt8?

    init(path: ObjectPath, adapterName: String, address: String, addressType: SimulatedAddressType) {
        self.path = path
        self.adapterName = adapterName
        self.address = address
        self.addressType = addressType
    }

    var isConnecting: Bool {
        if case .connecting = link { return true }
        return false
    }

    /// `UUIDs` as bluetoothd 5.66 to 5.87 computes it (`dev_property_get_uuids`): the advertised
    /// UUIDs until the services are resolved, then the profile list.
    var uuids: [String] {
        if gattKnown { return profileUUIDs }
        return eirUUIDs.isEmpty ? profileUUIDs : eirUUIDs
    }

    /// bluetoothd's `device->uuids`: the collected advertised UUIDs and the resolved primary
    /// services, in its order (`g_slist_insert_sorted` with `bt_uuid_strcmp`, which compares the
    /// big-endian values: the order of the lowercase 128-bit text forms).
    var profileUUIDs: [String] {
        var all = collectedUUIDs
        for uuid in gattUUIDs where !all.contains(uuid) { all.append(uuid) }
        return all.sorted()
    }

    /// The effective alias: the one set, else the name, else the address with dashes.
    var effectiveAlias: String { alias ?? name ?? BluetoothText.dashedAddress(address) }
}
