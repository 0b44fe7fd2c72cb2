import Foundation

/// Options for creating a central manager: Core Bluetooth's, and where to find Bluetooth on Linux.
public struct CentralManagerOptions: Sendable, Hashable {
    /// Accepted for source compatibility and ignored: Linux has no system power alert.
    public var showPowerAlert: Bool
    /// The restore identifier (`CBCentralManagerOptionRestoreIdentifierKey`): the manager saves
    /// its state under it on every change (at most once a second), and a later manager created with it gets that state
    /// back (`willRestoreState`). Any string works; it is a key, never a path.
    public var restoreIdentifier: String?
    /// Where restored state is kept; nil for ``RestorationStore/standard`` (the XDG state directory).
    public var restorationStore: RestorationStore?
    /// Linux: allow the manager to register a pairing agent with bluetoothd. True by default;
    /// false vetoes ``requestsDefaultPairingAgent``.
    ///
    /// Nothing is registered unless ``requestsDefaultPairingAgent`` is true as well: bluetoothd
    /// (5.51 and later) makes the first agent registered on the machine its default agent, and
    /// keeps every other one in line to become the default when the ones before it leave, so
    /// an agent registered at all would sooner or later answer the pairings of every program on
    /// the machine. A ``PairingAgent/delegate`` alone registers nothing either.
    public var registersPairingAgent: Bool
    /// Linux: register the manager's agent (`AgentManager1.RegisterAgent`, with `NoInputNoOutput`
    /// or the capability of ``PairingAgent/delegate``) and make it bluetoothd's *default* agent
    /// (`AgentManager1.RequestDefaultAgent`). False by default; needs
    /// ``registersPairingAgent``.
    ///
    /// If bluetoothd refuses `RequestDefaultAgent`, the agent is unregistered again. Whenever
    /// bluetoothd restarts, the agent registers and asks again.
    ///
    /// bluetoothd asks the default agent about every pairing that no `Device1.Pair` call
    /// started, for every program on the machine: a characteristic that needs encryption (the
    /// pairing it starts), a remote device pairing with us. Without a
    /// ``PairingAgent/delegate`` the agent then accepts just-works pairing with any device
    /// that asks, and nothing else; with one, the delegate decides. Ask for it on a machine
    /// with no desktop agent where encrypted characteristics must pair by themselves;
    /// bluetoothd goes back to the previous default agent when the manager's connection
    /// closes. Without any default agent, bluetoothd refuses such pairings ("No agent
    /// available") and the operation that needed them fails.
    public var requestsDefaultPairingAgent: Bool
    /// Whether the manager registers its agent: only as the default agent, and only when asked.
    var registersDefaultAgent: Bool { registersPairingAgent && requestsDefaultPairingAgent }
    /// Linux: receive notifications through `AcquireNotify`'s socket where bluetoothd offers it
    /// (true), or always through `StartNotify`'s `PropertiesChanged` signals (false, the default).
    ///
    /// The socket costs a fraction of the signal path's CPU, but bluetoothd before 5.84 mishandles
    /// it when the peripheral refuses the write of its Client Characteristic Configuration
    /// descriptor (for instance with ATT's Database Out Of Sync while the peripheral changes its
    /// services): `AcquireNotify` is never answered and the characteristic stays locked
    /// ("Notify acquired") until the link ends, when bluetoothd frees it twice
    /// (`register_notify_io_cb` in `src/gatt-client.c`, fixed by BlueZ commit 476ae809a).
    /// bluetoothd also drops notifications that a peripheral sends before it answered that
    /// write on the socket path, where `StartNotify` keeps them. Set true for peripherals whose
    /// services do not change while connected, on a bluetoothd you know. A socket that
    /// bluetoothd closes while the link stays up is replaced by `StartNotify` without the app
    /// doing anything.
    public var usesNotifySockets: Bool
    /// The adapter to use: `"hci1"`, or its address such as `"00:AA:01:00:00:23"`; nil for the first one.
    public var adapter: String?
    /// The D-Bus address of the system bus; nil to use `DBUS_SYSTEM_BUS_ADDRESS` or the default socket.
    public var busAddress: String?

    /// Creates options; every field has a default.
    public init(
        showPowerAlert: Bool = false, restoreIdentifier: String? = nil, adapter: String? = nil,
        busAddress: String? = nil, restorationStore: RestorationStore? = nil, registersPairingAgent: Bool = true,
        requestsDefaultPairingAgent: Bool = false, usesNotifySockets: Bool = false
    ) {
        self.usesNotifySockets = usesNotifySockets
        self.requestsDefaultPairingAgent = requestsDefaultPairingAgent
        self.showPowerAlert = showPowerAlert
        self.restoreIdentifier = restoreIdentifier
        self.restorationStore = restorationStore
        self.registersPairingAgent = registersPairingAgent
        self.adapter = adapter
        self.busAddress = busAddress
    }

    /// Reads Core Bluetooth's option keys and the Linux ones; values of the wrong type are ignored.
    ///
    /// Flags may be `Bool` or `NSNumber` (`NSNumber(value: true)`, as Objective-C code passes them).
    /// Core Bluetooth's keys: ``CBCentralManagerOptionShowPowerAlertKey`` and
    /// ``CBCentralManagerOptionRestoreIdentifierKey`` (the peripheral manager's keys have the same
    /// values). Linux keys: ``BlueZKitOptionAdapterKey`` (``adapter``) and
    /// ``BlueZKitOptionBusAddressKey`` (``busAddress``), both `String`s.
    public init(dictionary: [String: Any]) {
        self.init()
        showPowerAlert = dictionary.flag(CBCentralManagerOptionShowPowerAlertKey) ?? false
        restoreIdentifier = dictionary[CBCentralManagerOptionRestoreIdentifierKey] as? String
        adapter = dictionary[BlueZKitOptionAdapterKey] as? String
        busAddress = dictionary[BlueZKitOptionBusAddressKey] as? String
    }
}

/// Options for a scan: Core Bluetooth's, and BlueZ's discovery-filter extras.
public struct ScanOptions: Sendable, Hashable {
    /// Report every advertisement instead of once per peripheral
    /// (`CBCentralManagerScanOptionAllowDuplicatesKey`); also sets BlueZ's `DuplicateData`.
    public var allowDuplicates: Bool
    /// Also report peripherals that solicit one of these services, even when they advertise
    /// none of the scanned-for ones (`CBCentralManagerScanOptionSolicitedServiceUUIDsKey`);
    /// read from the raw advertising data where BlueZ provides it.
    public var solicitedServiceUUIDs: [BluetoothUUID]
    /// Linux: report only advertisements received at or above this RSSI (dBm); BlueZ's `RSSI` filter.
    public var rssiThreshold: Int?
    /// Linux: report only devices whose address or name starts with this text; BlueZ's `Pattern`
    /// filter (bluetoothd 5.54 and later), checked by the central too, as bluetoothd lets through
    /// what another discovery client's filter admits.
    ///
    /// Nil sends the empty pattern, which every device matches: it keeps bluetoothd's discovery
    /// a filtered one, which reports advertisers without a discoverable flag too.
    public var pattern: String?
    /// Linux: scan passively, reporting only peripherals whose advertisement matches the
    /// ``PassiveScan``'s patterns (BlueZ's advertisement monitor); nil for an active scan.
    /// See ``PassiveScan`` and ``CentralManager/scanPassively(withServices:options:)``.
    public var passive: PassiveScan?

    /// Creates scan options; every field has a default.
    public init(
        allowDuplicates: Bool = false, solicitedServiceUUIDs: [BluetoothUUID] = [], rssiThreshold: Int? = nil,
        pattern: String? = nil, passive: PassiveScan? = nil
    ) {
        self.allowDuplicates = allowDuplicates
        self.solicitedServiceUUIDs = solicitedServiceUUIDs
        self.rssiThreshold = rssiThreshold
        self.pattern = pattern
        self.passive = passive
    }

    /// Reads Core Bluetooth's scan option keys, and ``BlueZKitScanOptionPassiveKey`` (a
    /// ``PassiveScan``, for ``passive``); flags may be `Bool` or `NSNumber`.
    public init(dictionary: [String: Any]?) {
        self.init()
        guard let dictionary else { return }
        allowDuplicates = dictionary.flag(CBCentralManagerScanOptionAllowDuplicatesKey) ?? false
        solicitedServiceUUIDs =
            (dictionary[CBCentralManagerScanOptionSolicitedServiceUUIDsKey] as? [BluetoothUUID]) ?? []
        passive = dictionary[BlueZKitScanOptionPassiveKey] as? PassiveScan
    }
}

extension Dictionary where Key == String, Value == Any {
    /// A flag of an options dictionary: a `Bool`, or an `NSNumber`'s `boolValue` as Core
    /// Bluetooth reads it; nil when absent or of another type.
    func flag(_ key: String) -> Bool? {
        guard let value = self[key] else { return nil }
        if let flag = value as? Bool { return flag }
        return (value as? NSNumber)?.boolValue
    }
}
