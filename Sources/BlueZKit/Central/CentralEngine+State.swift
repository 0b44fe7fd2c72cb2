import BlueZ
import Foundation

/// The engine's state (``CentralEngine/state``), and its fields under their own names: computed
/// properties that forward to the ``QueueBound``, so each access checks that it runs on the bus
/// queue.
extension CentralEngine {
    /// What the engine knows and does, on the bus queue. A link's state has one owner, ``links``:
    /// `Peripheral.state` and the manager's list of linked peripherals are projections of it
    /// (see ``Link``).
    struct State {
        /// bluetoothd's and the adapter's presence, and the state they give.
        var presence = AdapterPresence()
        var lastState: ManagerState?
        var peripherals: [DeviceID: Peripheral] = [:]
        var scan: ScanState?
        /// Counts the scans started, so that late events of a replaced one are told apart.
        var scanGeneration = 0
        /// The advertisement monitor of a passive scan (`CentralEngine+PassiveScan.swift`).
        var passiveScan: PassiveSession?
        var links: [DeviceID: Link] = [:]
        /// Why each device's last link ended, as bluetoothd said (5.83 and later), until its next
        /// link: the error of an operation that the link's end failed (``operationError(_:of:)``).
        var linkEndReasons: [DeviceID: BlueZClient.DisconnectReason] = [:]
        var gatt: [DeviceID: GattModel] = [:]
        var pendingServiceDiscoveries: [DeviceID: [[BluetoothUUID]?]] = [:]
        /// The order of each peripheral's write-with-response results (`CentralEngine+GATT.swift`).
        var writeResults: [DeviceID: WriteResultOrder] = [:]
        var backgroundDiscovery = false
        /// Our discovery, paused while connection attempts run (`CentralEngine+ConnectPause.swift`).
        var connectPause = ConnectPause()
        var lastSeenRSSI: [DeviceID: Int16] = [:]
        /// The service UUIDs each device last advertised as far as bluetoothd said
        /// (`CentralEngine+Advertisements.swift`); kept while bluetoothd's `UUIDs` shows resolved
        /// services instead, until the device goes.
        var advertisedServices: [DeviceID: [BluetoothUUID]] = [:]
        /// The name of each peripheral as this engine last reported it (`peripheralDidUpdateName`).
        var knownNames: [DeviceID: String] = [:]
        /// Peripherals of devices bluetoothd removed, while the app still holds them
        /// (`CentralEngine+Forgetting.swift`).
        var forgotten: [DeviceID: ForgottenPeripheral] = [:]
        /// The size at which `forget` next drops released entries from `forgotten`.
        var forgottenPruneAt = CentralEngine.forgottenPruneMinimum
        /// Restored peripherals whose links resume once the adapter is powered on.
        var restoredLinks: [DeviceID] = []
        /// Restored subscriptions to enable again once the peripheral is connected and resolved.
        var restoredSubscriptions: [DeviceID: [BlueZClient.AttributeID]] = [:]
        /// The `Disconnect` of a link that came up after its request was cancelled; the next
        /// request for the device waits for it (`CentralEngine+Connections.swift`).
        var teardowns: [DeviceID: Task<Void, Never>] = [:]
    }

    var presence: AdapterPresence {
        get { state.value.presence }
        _modify { yield &state.value.presence }
    }
    var lastState: ManagerState? {
        get { state.value.lastState }
        _modify { yield &state.value.lastState }
    }
    /// The adapter's address as last reported.
    var adapterAddress: String { state.value.presence.adapterAddress }
    var peripherals: [DeviceID: Peripheral] {
        get { state.value.peripherals }
        _modify { yield &state.value.peripherals }
    }
    var scan: ScanState? {
        get { state.value.scan }
        _modify { yield &state.value.scan }
    }
    var scanGeneration: Int {
        get { state.value.scanGeneration }
        _modify { yield &state.value.scanGeneration }
    }
    var passiveScan: PassiveSession? {
        get { state.value.passiveScan }
        _modify { yield &state.value.passiveScan }
    }
    var links: [DeviceID: Link] {
        get { state.value.links }
        _modify { yield &state.value.links }
    }
    var linkEndReasons: [DeviceID: BlueZClient.DisconnectReason] {
        get { state.value.linkEndReasons }
        _modify { yield &state.value.linkEndReasons }
    }
    var gatt: [DeviceID: GattModel] {
        get { state.value.gatt }
        _modify { yield &state.value.gatt }
    }
    var pendingServiceDiscoveries: [DeviceID: [[BluetoothUUID]?]] {
        get { state.value.pendingServiceDiscoveries }
        _modify { yield &state.value.pendingServiceDiscoveries }
    }
    var writeResults: [DeviceID: WriteResultOrder] {
        get { state.value.writeResults }
        _modify { yield &state.value.writeResults }
    }
    var backgroundDiscovery: Bool {
        get { state.value.backgroundDiscovery }
        _modify { yield &state.value.backgroundDiscovery }
    }
    var connectPause: ConnectPause {
        get { state.value.connectPause }
        _modify { yield &state.value.connectPause }
    }
    var lastSeenRSSI: [DeviceID: Int16] {
        get { state.value.lastSeenRSSI }
        _modify { yield &state.value.lastSeenRSSI }
    }
    var advertisedServices: [DeviceID: [BluetoothUUID]] {
        get { state.value.advertisedServices }
        _modify { yield &state.value.advertisedServices }
    }
    var knownNames: [DeviceID: String] {
        get { state.value.knownNames }
        _modify { yield &state.value.knownNames }
    }
    var forgotten: [DeviceID: ForgottenPeripheral] {
        get { state.value.forgotten }
        _modify { yield &state.value.forgotten }
    }
    var forgottenPruneAt: Int {
        get { state.value.forgottenPruneAt }
        _modify { yield &state.value.forgottenPruneAt }
    }
    var restoredLinks: [DeviceID] {
        get { state.value.restoredLinks }
        _modify { yield &state.value.restoredLinks }
    }
    var restoredSubscriptions: [DeviceID: [BlueZClient.AttributeID]] {
        get { state.value.restoredSubscriptions }
        _modify { yield &state.value.restoredSubscriptions }
    }
    var teardowns: [DeviceID: Task<Void, Never>] {
        get { state.value.teardowns }
        _modify { yield &state.value.teardowns }
    }
}
