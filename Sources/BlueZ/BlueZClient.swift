package import DBus
package import Dispatch
import Locking

/// bluetoothd for one adapter, as both managers see it: which adapter is in use and whether
/// it is powered, device advertisements and changes, discovery, and (in `BlueZClient+GATT.swift`,
/// `BlueZClient+Acquire.swift`) the remote GATT databases of connected devices.
///
/// Threading: events are delivered on the connection's queue, in bus order,
/// after `cache` was updated. `Sendable` as the compiler checks it: `adapterPath`,
/// `lastStatus`, `warnedOfFilterUUIDs`, `disconnectReasons`, `gattServices` and `batteryLevels`
/// are in a `QueueBound` that checks that queue on every access.
package final class BlueZClient: Sendable {
    /// An opaque handle on one remote device, so that the layer above can keep
    /// devices apart without knowing BlueZ's object paths.
    package struct DeviceID: Hashable, Sendable {
        let path: ObjectPath
        /// The device's address as its object path spells it (`dev_AA_BB_…` → `AA:BB:…`).
        package var address: String? { BlueZGattRequest.address(of: path) }

        /// A string that names the device across processes and bluetoothd restarts (for saved state).
        package var token: String { path.rawValue }

        /// The device a saved ``token`` names; nil when the text cannot be one.
        package init?(token: String) {
            guard let path = try? ObjectPath(token), BlueZGattRequest.address(of: path) != nil else { return nil }
            self.path = path
        }

        init(path: ObjectPath) { self.path = path }

        /// The device an object below it belongs to (`…/dev_AA_BB_CC_DD_EE_FF/service000a/…`);
        /// nil for a path under no device. Cheap: one scan of the path, not validated again.
        init?(containing path: ObjectPath) {
            guard let device = path.ancestor(withElementPrefix: "dev_"), device != path else { return nil }
            self.path = device
        }
    }

    /// The adapter as the central sees it.
    package enum AdapterStatus: Sendable, Hashable {
        /// bluetoothd is not on the bus (not running, or restarting).
        case serviceAbsent
        /// bluetoothd runs but has no adapter matching the selection.
        case noAdapter
        /// bluetoothd runs but the bus policy does not let this process talk to it (AccessDenied).
        case accessDenied
        case present(address: String, powered: Bool)
    }

    package enum Event: Sendable {
        case adapterChanged(AdapterStatus)
        /// An advertisement from the device was received (it carries RSSI or advertising data).
        case deviceAdvertised(DeviceID, BlueZDeviceProperties)
        /// Other properties of a device changed (connection state, name, services resolved…):
        /// `changed` holds those this layer reads (it may be empty when only others changed).
        case deviceChanged(DeviceID, BlueZDeviceProperties, changed: Set<BlueZDeviceProperties.Property>)
        case deviceRemoved(DeviceID)
        /// Remote GATT objects (services, characteristics, descriptors) of a device appeared or
        /// went: `removed` names the object when one went.
        case gattObjectsChanged(DeviceID, removed: AttributeID?)
        /// The `Value` of a remote characteristic or descriptor changed (a notification or
        /// indication under `StartNotify`, or a read's result) and no route took it
        /// (``routeValues(of:to:)``). The attribute's device, when there is one, is
        /// `AttributeID.device`: not looked for here.
        case valueChanged(AttributeID, [UInt8])
        /// The device's battery level changed (`Battery1.Percentage`, 0 to 100), or it has none
        /// any more (nil: the link ended, or bluetoothd went away): `BlueZClient+Battery.swift`.
        case batteryChanged(DeviceID, percentage: Int?)
    }

    let connection: DBusConnection
    /// `hciN`, an adapter address, or nil for the first adapter.
    package let adapterSelector: String?
    let events: @Sendable (Event) -> Void
    /// bluetoothd's object tree, as this client follows it.
    package let cache: BlueZObjectCache

    /// What the client keeps on the connection's queue.
    struct State {
        var adapterPath: ObjectPath?
        var lastStatus: AdapterStatus?
        var warnedOfFilterUUIDs = false
        var disconnectReasons: [DeviceID: Disconnection] = [:]
        /// The `GattService1` objects under each device (`BlueZClient+AdvertisedServices.swift`).
        var gattServices: [DeviceID: Set<ObjectPath>] = [:]
        /// The battery level last reported per device (`BlueZClient+Battery.swift`).
        var batteryLevels: [DeviceID: Int] = [:]
    }
    /// The client's state, on the connection's queue (checked on every access).
    let state: QueueBound<State>
    /// A weak reference to the client, for the cache's event handler: set in `init`, before the
    /// cache can have any event.
    struct WeakClient {
        weak var client: BlueZClient?
    }

    private(set) var adapterPath: ObjectPath? {
        get { state.value.adapterPath }
        _modify { yield &state.value.adapterPath }
    }
    private var lastStatus: AdapterStatus? {
        get { state.value.lastStatus }
        _modify { yield &state.value.lastStatus }
    }
    private var warnedOfFilterUUIDs: Bool {
        get { state.value.warnedOfFilterUUIDs }
        _modify { yield &state.value.warnedOfFilterUUIDs }
    }
    /// The last `Device1.Disconnected` signal of each device not yet taken (on the
    /// queue; `BlueZClient+DisconnectReasons.swift`).
    var disconnectReasons: [DeviceID: Disconnection] {
        get { state.value.disconnectReasons }
        _modify { yield &state.value.disconnectReasons }
    }
    /// The `GattService1` objects under each device (on the queue).
    var gattServices: [DeviceID: Set<ObjectPath>] {
        get { state.value.gattServices }
        _modify { yield &state.value.gattServices }
    }
    /// The battery level last reported per device (on the queue).
    var batteryLevels: [DeviceID: Int] {
        get { state.value.batteryLevels }
        _modify { yield &state.value.batteryLevels }
    }
    /// The subscription to `Device1.Disconnected`, once started (any thread).
    let disconnectedSubscription = PosixMutex<DBusSubscription?>(nil)

    /// What a client follows of bluetoothd's property changes.
    package enum Watch: Sendable {
        /// Everything: adapters, devices and their remote GATT databases (the central role).
        case everything
        /// Adapters, their advertising managers and devices: no remote GATT object's changes
        /// (no `valueChanged`, no `gattObjectsChanged` for a changed property), for the
        /// peripheral role, which then is not woken by every notification a central on the same
        /// bluetoothd receives.
        case adaptersAndDevices

        var propertyInterfaces: [InterfaceName]? {
            switch self {
            case .everything: nil
            case .adaptersAndDevices: [BlueZNames.adapter, BlueZNames.advertisingManager, BlueZNames.device]
            }
        }
    }

    /// A client on `bus` (see ``init(connection:adapter:watching:events:)``).
    package convenience init(
        bus: BlueZBus, adapter: String?, watching watch: Watch = .everything,
        events: @escaping @Sendable (Event) -> Void
    ) {
        self.init(connection: bus.connection, adapter: adapter, watching: watch, events: events)
    }

    package init(
        connection: DBusConnection, adapter: String?, watching watch: Watch = .everything,
        events: @escaping @Sendable (Event) -> Void
    ) {
        self.connection = connection
        self.adapterSelector = adapter
        self.events = events
        self.state = QueueBound(State(), queue: connection.queue)
        let target = PosixMutex(WeakClient())
        self.cache = BlueZObjectCache(connection: connection, propertyInterfaces: watch.propertyInterfaces) {
            event in target.withLock { $0.client }?.handle(event)
        }
        target.withLock { $0.client = self }
    }

    /// Starts following bluetoothd; the first `adapterChanged` follows once
    /// bluetoothd's tree is loaded, or at once when bluetoothd is absent.
    package func start() async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            try await cache.start()
            try await followDisconnectReasons()
        }
    }

    package func stop() {
        cache.stop()
        disconnectedSubscription.withLock { $0 }?.cancel()
    }

    /// The adapter's current status (on the queue).
    package var status: AdapterStatus {
        guard cache.isLoaded else { return cache.loadError?.code == .accessDenied ? .accessDenied : .serviceAbsent }
        guard let path = adapterPath, let adapter = cache.properties(BlueZNames.adapter, at: path) else {
            return .noAdapter
        }
        return .present(address: adapter["Address"]?.stringValue ?? "", powered: adapter["Powered"]?.boolValue ?? false)
    }

    /// What the running bluetoothd does for GATT applications and advertisements, probed from the
    /// adapter's properties (on the queue); the baseline (5.66) while there is no adapter.
    package var serverFeatures: BlueZServerFeatures {
        guard let path = adapterPath, let adapter = cache.properties(BlueZNames.adapter, at: path) else {
            return .baseline
        }
        return BlueZServerFeatures(
            adapterProperties: adapter, advertisingProperties: cache.properties(BlueZNames.advertisingManager, at: path)
        )
    }

    /// An opaque handle on an adapter, for registrations on it.
    package struct AdapterID: Hashable, Sendable {
        let path: ObjectPath
    }

    /// The adapter in use, for the layer's own registration calls (on the queue).
    package var adapter: AdapterID? { adapterPath.map(AdapterID.init) }

    /// ``serverFeatures`` from any thread (hops onto the queue).
    package func currentServerFeatures() async -> BlueZServerFeatures {
        await withCheckedContinuation { continuation in
            connection.queue.async { continuation.resume(returning: self.serverFeatures) }
        }
    }

    /// The adapter in use, from any thread (hops onto the queue).
    package func currentAdapter() async -> AdapterID? {
        await withCheckedContinuation { continuation in
            connection.queue.async { continuation.resume(returning: self.adapter) }
        }
    }

    /// The serial queue everything of this client (and its connection) happens on.
    package var queue: DispatchQueue { connection.queue }

    /// False while the bus is away (being connected again after a loss) or once it is closed.
    package var isBusOpen: Bool { connection.isOpen }

    /// What we sent that the bus has not taken yet (any thread): the basis of back-pressure.
    package var backlog: (queuedMessages: Int, outgoingBytes: Int) {
        let backlog = connection.backlog
        return (backlog.queuedMessages, backlog.outgoingBytes)
    }

    /// Closes the connection for good (the bus drops our registrations with it).
    package func close() { connection.close() }

    /// The properties of a device (on the queue).
    package func device(_ id: DeviceID) -> BlueZDeviceProperties? { device(at: id.path) }

    func device(at path: ObjectPath) -> BlueZDeviceProperties? {
        cache.properties(BlueZNames.device, at: path).map(BlueZDeviceProperties.init)
    }

    /// The devices of our adapter that BlueZ knows (on the queue).
    package var devices: [(DeviceID, BlueZDeviceProperties)] {
        guard let adapterPath else { return [] }
        return cache.paths(with: BlueZNames.device).compactMap { path in
            guard let device = device(at: path), device.adapter == adapterPath else { return nil }
            return (DeviceID(path: path), device)
        }
    }

    // MARK: Discovery

    /// `Adapter1.SetDiscoveryFilter` with LE transport and, unless one is given, an empty `Pattern`.
    ///
    /// The empty pattern (a prefix of every address, `Pattern` since 5.54) keeps the discovery a
    /// *filtered* one. Without it, bluetoothd 5.67 and later merge a filter that asks for nothing
    /// but the adapter's own transport — `le` alone on an LE-only controller — as a regular
    /// discovery (`merge_discovery_filters`, de8e7cfce), and a regular discovery drops LE
    /// advertisers without a discoverable flag (`device_is_discoverable`): beacons, and
    /// peripherals a pending connection waits for. Core Bluetooth reports them.
    ///
    /// Where bluetoothd crashes on a filter with service UUIDs
    /// (``BlueZServerFeatures/uuidDiscoveryFilterCrashes``, 5.87), the filter goes without them
    /// and bluetoothd reports every device: the caller must match services itself (as
    /// `CentralEngine` does for every scan).
    package func setDiscoveryFilter(uuids: [String], duplicateData: Bool, rssi: Int16?, pattern: String?)
        async throws(BlueZError)
    {
        let uuids = !uuids.isEmpty && connection.onQueue({ leavesOutFilterUUIDs() }) ? [] : uuids
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            var filter: [String: DBusValue] = [
                "Transport": .string("le"), "DuplicateData": .bool(duplicateData), "UUIDs": .stringArray(uuids),
                "Pattern": .string(pattern ?? ""),
            ]
            if let rssi { filter["RSSI"] = .int16(rssi) }
            try await callAdapter("SetDiscoveryFilter", [.stringVariantDictionary(filter)])
        }
    }

    /// Whether this bluetoothd needs discovery filters without UUIDs; warns the first time (on the queue).
    private func leavesOutFilterUUIDs() -> Bool {
        guard serverFeatures.uuidDiscoveryFilterCrashes else { return false }
        if !warnedOfFilterUUIDs {
            warnedOfFilterUUIDs = true
            BlueZLog.warning(
                "bluetoothd 5.87 crashes on a discovery filter with service UUIDs (BlueZ issue 2282):"
                    + " scanning without them and matching services in this process")
        }
        return true
    }

    /// `Adapter1.StartDiscovery`.
    package func startDiscovery() async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in try await callAdapter("StartDiscovery")
        }
    }

    /// `Adapter1.StopDiscovery`.
    package func stopDiscovery() async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in try await callAdapter("StopDiscovery")
        }
    }

    private func callAdapter(_ member: MemberName, _ arguments: [DBusValue] = []) async throws(DBusError) {
        // On the queue or off it: tasks may run on the queue (`BlueZBus.executor`).
        let path: ObjectPath? = connection.onQueue { adapterPath }
        guard let path else { throw DBusError(.other("org.bluez.Error.NotReady"), "no adapter") }
        // bluetoothd answers these at once; a short limit keeps one lost reply
        // from holding up the discovery commands queued behind it.
        _ = try await connection.call(
            destination: BlueZNames.service, path: path, interface: BlueZNames.adapter, member: member,
            arguments: arguments, timeout: .seconds(5))
    }

    // MARK: Devices

    /// `Device1.Connect`. A successful reply means connected, even when
    /// bluetoothd never signals `Connected=true` (BlueZ 5.66 can miss it).
    package func connect(_ id: DeviceID, timeout: Duration = .seconds(60)) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: id.path, interface: BlueZNames.device, member: "Connect",
                timeout: timeout)
        }
    }

    /// `Adapter1.RemoveDevice`: bluetoothd forgets the device, its pairing and its cached data.
    package func removeDevice(_ id: DeviceID) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            try await callAdapter("RemoveDevice", [.objectPath(id.path)])
        }
    }

    /// `Device1.Disconnect` (bluetoothd waits about 2.5 s before it answers).
    package func disconnect(_ id: DeviceID) async throws(BlueZError) {
        try await BlueZError.converting { () async throws(DBusError) -> Void in
            _ = try await connection.call(
                destination: BlueZNames.service, path: id.path, interface: BlueZNames.device, member: "Disconnect")
        }
    }

    // MARK: On the queue

    private func handle(_ event: BlueZObjectCache.Event) {
        trackGattServices(event)
        trackBatteries(event)
        switch event {
        case .loaded, .vanished:
            adapterPath = selectAdapter()
            reportStatusIfChanged()
        case .loadFailed(let error):
            // Other failures keep the state: the cache tries again.
            if error.code == .accessDenied { reportStatusIfChanged() }
        case .interfacesAdded(let path, let interfaces):
            if interfaces[BlueZNames.adapter.rawValue] != nil {
                if adapterPath == nil { adapterPath = selectAdapter() }
                reportStatusIfChanged()
            }
            if interfaces[BlueZNames.device.rawValue] != nil, let device = device(at: path),
                device.adapter == adapterPath
            {
                if device.rssi != nil { events(.deviceAdvertised(DeviceID(path: path), device)) }
                // A device that appears already connected (a central that connected to us;
                // bluetoothd can coalesce the change into InterfacesAdded).
                if device.connected { events(.deviceChanged(DeviceID(path: path), device, changed: [.connected])) }
            } else {
                gattObjectsChanged(event)
            }
        case .interfacesRemoved(let path, let interfaces):
            if path == adapterPath, interfaces.contains(BlueZNames.adapter.rawValue) {
                adapterPath = selectAdapter()
                reportStatusIfChanged()
            }
            if interfaces.contains(BlueZNames.device.rawValue) {
                disconnectReasons[DeviceID(path: path)] = nil
                events(.deviceRemoved(DeviceID(path: path)))
            } else {
                gattObjectsChanged(event)
            }
        case .propertiesChanged(let path, let interface, let changed, let invalidated):
            if path == adapterPath, interface == BlueZNames.adapter.rawValue {
                reportStatusIfChanged()
            } else if interface == BlueZNames.device.rawValue, let device = device(at: path),
                device.adapter == adapterPath
            {
                let names = Set(changed.keys).union(invalidated)
                let advertised = changed.keys.contains { BlueZDeviceProperties.Property.carriesAdvertisement($0) }
                if advertised && device.rssi != nil { events(.deviceAdvertised(DeviceID(path: path), device)) }
                if names.contains(where: { !BlueZDeviceProperties.Property.carriesAdvertisement($0) }) {
                    let properties = Set(names.compactMap(BlueZDeviceProperties.Property.init(name:)))
                    events(.deviceChanged(DeviceID(path: path), device, changed: properties))
                }
            } else {
                gattObjectsChanged(event)
            }
        case .valueChanged(let path, _, let bytes):
            events(.valueChanged(AttributeID(path: path), bytes))
        }
    }

    /// Reports a change of remote GATT objects; other objects' changes concern no one above.
    private func gattObjectsChanged(_ event: BlueZObjectCache.Event) {
        let path: ObjectPath
        let interfaces: [String]
        let removed: Bool
        switch event {
        case .interfacesAdded(let added, let map): (path, interfaces, removed) = (added, Array(map.keys), false)
        case .interfacesRemoved(let gone, let names): (path, interfaces, removed) = (gone, names, true)
        default: return
        }
        guard interfaces.contains(where: Self.gattInterfaces.contains), let device = DeviceID(containing: path) else {
            return
        }
        events(.gattObjectsChanged(device, removed: removed ? AttributeID(path: path) : nil))
    }

    private static let gattInterfaces = Set(
        [BlueZNames.gattService, BlueZNames.gattCharacteristic, BlueZNames.gattDescriptor].map(\.rawValue))

    private func reportStatusIfChanged() {
        let current = status
        guard current != lastStatus else { return }
        lastStatus = current
        events(.adapterChanged(current))
    }

    /// The adapter named by `adapterSelector` (`hciN` or its address), else the first one.
    private func selectAdapter() -> ObjectPath? {
        let adapters = cache.paths(with: BlueZNames.adapter)
        guard let selector = adapterSelector else { return adapters.first }
        return adapters.first { path in
            path.rawValue.hasSuffix("/" + selector)
                || cache.properties(BlueZNames.adapter, at: path)?["Address"]?.stringValue?.uppercased()
                    == selector.uppercased()
        }
    }
}
