/// Options for creating a peripheral manager: Core Bluetooth's, and where to find Bluetooth on Linux.
public struct PeripheralManagerOptions: Sendable {
    /// Accepted for source compatibility and ignored: Linux has no system power alert.
    public var showPowerAlert: Bool
    /// The restore identifier (`CBPeripheralManagerOptionRestoreIdentifierKey`): the manager saves
    /// its published services and advertisement under it on every change (at most once a
    /// second), and a later manager created with it gets them back (`willRestoreState`). Any
    /// string works; it is a key, never a path.
    public var restoreIdentifier: String?
    /// Where restored state is kept; nil for ``RestorationStore/standard`` (the XDG state directory).
    public var restorationStore: RestorationStore?
    /// Linux: allow the manager to register a pairing agent with bluetoothd; false vetoes
    /// ``requestsDefaultPairingAgent``. True by default. Nothing is registered without
    /// ``requestsDefaultPairingAgent`` (see ``CentralManagerOptions/registersPairingAgent``).
    public var registersPairingAgent: Bool
    /// Linux: register the manager's agent and make it bluetoothd's *default* agent, so that it
    /// answers the pairings centrals start with us (see
    /// ``CentralManagerOptions/requestsDefaultPairingAgent``). False by default.
    public var requestsDefaultPairingAgent: Bool
    /// Whether the manager registers its agent: only as the default agent, and only when asked.
    var registersDefaultAgent: Bool { registersPairingAgent && requestsDefaultPairingAgent }
    /// The adapter to use: `"hci1"`, or its address such as `"00:AA:01:00:00:23"`; nil for the first one.
    public var adapter: String?
    /// The D-Bus address of the system bus; nil to use `DBUS_SYSTEM_BUS_ADDRESS` or the default socket.
    public var busAddress: String?

    /// Creates options; every field has a default.
    public init(
        showPowerAlert: Bool = false, restoreIdentifier: String? = nil, adapter: String? = nil,
        busAddress: String? = nil, restorationStore: RestorationStore? = nil, registersPairingAgent: Bool = true,
        requestsDefaultPairingAgent: Bool = false
    ) {
        self.showPowerAlert = showPowerAlert
        self.restoreIdentifier = restoreIdentifier
        self.restorationStore = restorationStore
        self.registersPairingAgent = registersPairingAgent
        self.requestsDefaultPairingAgent = requestsDefaultPairingAgent
        self.adapter = adapter
        self.busAddress = busAddress
    }

    /// Reads Core Bluetooth's option keys and the Linux ones; values of the wrong type are ignored.
    ///
    /// Flags may be `Bool` or `NSNumber`. Core Bluetooth's keys:
    /// ``CBPeripheralManagerOptionShowPowerAlertKey`` and
    /// ``CBPeripheralManagerOptionRestoreIdentifierKey``. Linux keys: ``BlueZKitOptionAdapterKey``
    /// (``adapter``) and ``BlueZKitOptionBusAddressKey`` (``busAddress``), both `String`s.
    public init(dictionary: [String: Any]) {
        self.init()
        showPowerAlert = dictionary.flag(CBPeripheralManagerOptionShowPowerAlertKey) ?? false
        restoreIdentifier = dictionary[CBPeripheralManagerOptionRestoreIdentifierKey] as? String
        adapter = dictionary[BlueZKitOptionAdapterKey] as? String
        busAddress = dictionary[BlueZKitOptionBusAddressKey] as? String
    }
}
