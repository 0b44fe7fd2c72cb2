import BlueZ
import Foundation
import Locking

/// The bus side of a central manager: turns BlueZ's events into Core
/// Bluetooth events and posts them to the manager. Never calls user code.
///
/// The invariant behind `@unchecked Sendable`: every stored `var` is touched
/// only on the connection's queue (the client's events arrive there; public
/// calls hop there).
final class CentralEngine: @unchecked Sendable {
    weak var manager: CentralManager?
    /// The bus connection's serial queue: where every stored `var` is touched.
    let busQueue: DispatchQueue
    var client: BlueZClient!
    /// bluetoothd's and the adapter's presence, and the state they give (on the bus queue).
    private var presence = AdapterPresence()
    private var lastState: ManagerState?
    /// The adapter's address as last reported.
    var adapterAddress: String { presence.adapterAddress }
    var peripherals: [DeviceID: Peripheral] = [:]
    var scan: ScanState?
    /// Counts the scans started, so that late events of a replaced one are told apart.
    var scanGeneration = 0
    /// The advertisement monitor of a passive scan (`CentralEngine+PassiveScan.swift`).
    var passiveScan: PassiveSession?
    var links: [DeviceID: Link] = [:]
    /// Why each device's last link ended, as bluetoothd said (5.84 and later), until its next
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
    let discoveryChain: SerialTaskChain
    /// The bus queue as a task executor (``onBusQueue(_:)``).
    let busExecutor: any TaskExecutor

    /// What a running scan reports and has reported.
    struct ScanState {
        var services: Set<BluetoothUUID>?
        var options: ScanOptions
        /// The advertisement last reported per device in this scan (duplicate suppression).
        var reported: [DeviceID: AdvertisementData] = [:]
    }

    /// The pairing agent, registered as bluetoothd's default agent whenever bluetoothd appears on
    /// the bus; nil unless the app asked for the default agent (``CentralManagerOptions``).
    let agent: BlueZAgent?

    /// Whether subscriptions use `AcquireNotify` where bluetoothd offers it.
    let usesNotifySockets: Bool

    init(
        manager: CentralManager, bus: BlueZBus, adapter: String?, pairingAgent: Bool,
        usesNotifySockets: Bool = false
    ) {
        self.manager = manager
        self.usesNotifySockets = usesNotifySockets
        self.busQueue = bus.queue
        self.busExecutor = bus.executor
        self.discoveryChain = SerialTaskChain(executor: bus.executor)
        self.agent = pairingAgent ? BlueZAgent(bus: bus) : nil
        self.client = BlueZClient(bus: bus, adapter: adapter) { [weak self] event in
            self?.handle(event)
        }
    }

    func start() async throws(BlueZError) { try await client.start() }

    /// Runs `operation` as a task on the bus queue: between its suspension points it runs as a
    /// block on the queue, so it reads and writes the engine's state directly — one model for
    /// the engine, with no hop back to the queue after each `await`.
    @discardableResult
    func onBusQueue(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        Task(executorPreference: busExecutor, operation: operation)
    }

    /// Runs discovery commands one after another, in the order they were asked
    /// for: a stop must never overtake the start it follows. They run on the bus queue
    /// (``onBusQueue(_:)``). Returns the task that runs `operation`.
    @discardableResult
    func inDiscoveryOrder(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        discoveryChain.enqueue(operation)
    }

    func close() {
        client.stop()
        client.close()
    }

    // MARK: Scanning (called from any thread)

    func startScan(services: [BluetoothUUID]?, options: ScanOptions) {
        if options.passive != nil { return startPassiveScan(services: services, options: options, completion: nil) }
        busQueue.async {
            self.retirePassiveScan()
            self.scanGeneration += 1
            self.scan = ScanState(services: services.flatMap { $0.isEmpty ? nil : Set($0) }, options: options)
        }
        inDiscoveryOrder {
            do throws(BlueZError) {
                try await self.startDiscovery(services: services, options: options)
            } catch  where error.code == .inProgress {
                // Already discovering for us: the new filter applies.
            } catch  where error.code == .disconnected {
                // The manager was released and its connection closed.
            } catch {
                BlueZLog.warning("scan could not start: \(error)")
            }
        }
    }

    func stopScan() {
        busQueue.async {
            self.scan = nil
            self.retirePassiveScan()
        }
        inDiscoveryOrder {
            // Pending connections may still need discovery: hand over to the background one.
            self.backgroundDiscovery = false
            self.updateBackgroundDiscovery()
            if self.backgroundDiscovery { return }
            do throws(BlueZError) {
                try await self.client.stopDiscovery()
            } catch {
                BlueZLog.debug("StopDiscovery: \(error)")
            }
        }
    }

    /// Sets our discovery filter for a scan for `services` with `options`, then starts discovering.
    func startDiscovery(services: [BluetoothUUID]?, options: ScanOptions) async throws(BlueZError) {
        // BlueZ's UUID filter matches advertised services only: with solicited services to
        // look for as well, every device must come through and is filtered here.
        let uuids = options.solicitedServiceUUIDs.isEmpty ? (services ?? []).map(\.bluezString) : []
        try await client.setDiscoveryFilter(
            uuids: uuids, duplicateData: options.allowDuplicates,
            rssi: options.rssiThreshold.map { Int16(clamping: $0) }, pattern: options.pattern)
        try await client.startDiscovery()
    }

    // MARK: On the queue

    private func handle(_ event: BlueZClient.Event) {
        switch event {
        case .adapterChanged(let status):
            adapterChanged(status)
        case .deviceAdvertised(let id, let device):
            lastSeenRSSI[id] = device.rssi
            advertised(id, device)
            sawAdvertisement(id)
        case .deviceChanged(let id, let device, let changed):
            // Name only: bluetoothd changes Alias with it (in a separate signal) when no alias is set.
            // Compared with the name this engine last knew, not `peripheral.name`: the manager's
            // queue sets that from advertisements too, and may have done so already.
            if changed.contains("Name"), let peripheral = peripherals[id], let name = device.name,
                name != knownNames[id]
            {
                knownNames[id] = name
                manager?.post(.gatt(peripheral, .name(name)))
            }
            // A peripheral made from a saved token (restoration) learns its address type here.
            if let peripheral = peripherals[id], peripheral.addressType == nil {
                peripheral.update(address: device.address, type: device.addressType)
            }
            if changed.contains("Connected"), !device.connected { linkLost(id) }
            if changed.contains("ServicesResolved"), device.servicesResolved {
                servicesResolved(id)
                resubscribeRestored(id)
            }
        case .deviceRemoved(let id):
            scan?.reported[id] = nil
            passiveDeviceRemoved(id)
            lastSeenRSSI[id] = nil
            linkLost(id)
            abandonAttempt(id)
            updateBackgroundDiscovery()
            forget(id)
        case .gattObjectsChanged(let id, let removed):
            gattObjectsChanged(id, removed: removed)
        case .valueChanged(let attribute, let bytes):
            valueChanged(attribute, bytes)
        }
    }

    private func adapterChanged(_ status: BlueZClient.AdapterStatus) {
        let change = presence.update(status)
        if change.bluetoothdAppeared {
            agent?.registerAsDefaultInBackground(for: "CentralManager")
        }
        let newState = change.state
        if newState != .poweredOn {
            scan = nil
            resumeDiscovery()  // ends a pause for connection attempts; no scan to resume
            passiveScanInterrupted()
            // Links cannot outlive bluetoothd or the adapter: report them lost (before the
            // state, so that a delegate that connects again at once is still allowed to). The
            // requests that follow stay pending until the adapter is back.
            for (id, link) in links where link.phase == .connected { linkLost(id) }
            // Discovery sessions end with bluetoothd and with the adapter's power.
            backgroundDiscovery = false
        }
        guard newState != lastState else { return }
        lastState = newState
        // Restored links first: a peripheral whose link bluetoothd kept is `.connected` by the
        // time the delegate hears `.poweredOn`.
        if newState == .poweredOn {
            resumeRestoredLinks()
            updateBackgroundDiscovery()
        }
        manager?.post(.state(newState))
    }

    func advertised(_ id: DeviceID, _ device: BlueZDeviceProperties) {
        // Read the scan's parameters without copying its `reported` table: a copy per
        // advertisement cost most of the CPU of a busy scan and fragmented memory.
        guard let services = scan.map(\.services), let options = scan?.options, let rssi = device.rssi,
            passiveScanAdmits(id)
        else { return }
        let data = Self.advertisementData(device)
        // Core Bluetooth's rule: a peripheral that advertises one of the services, or (with the
        // solicited-services option) solicits one of those, is reported.
        let advertisesService = services.map { $0.contains(where: data.serviceUUIDs.contains) } ?? true
        let solicitsService = options.solicitedServiceUUIDs.contains(where: data.solicitedServiceUUIDs.contains)
        guard advertisesService || solicitsService else { return }
        if let threshold = options.rssiThreshold, Int(rssi) < threshold { return }
        // bluetoothd reports a device to every discovery client once one client's filter admits
        // it: another client's scan (any process's) lets through what our pattern would not.
        if let pattern = options.pattern, !Self.matches(pattern: pattern, device) { return }
        if !options.allowDuplicates {
            // Once per scan, and again only when the advertisement changes.
            if scan?.reported[id] == data { return }
            scan?.reported[id] = data
        }
        let peripheral = peripheral(for: id, device)
        // `Name` only: bluetoothd's `Alias` of a device without one is its address with dashes,
        // and Core Bluetooth's `name` is nil then.
        manager?.post(.discovered(peripheral, data, rssi: Int(rssi), name: device.name))
    }

    // MARK: Retrieving (from any thread but the connection's queue)

    /// The known devices whose identifiers are in `identifiers`, in that order.
    func retrievePeripherals(withIdentifiers identifiers: [UUID]) -> [Peripheral] {
        busQueue.sync {
            var byIdentifier: [UUID: Peripheral] = [:]
            for (id, device) in client.devices {
                let peripheral = peripheral(for: id, device)
                byIdentifier[peripheral.identifier] = peripheral
            }
            return identifiers.compactMap { byIdentifier[$0] }
        }
    }

    /// Every adapter bluetoothd has (any thread but the queue).
    var adapters: [BluetoothAdapter] {
        busQueue.sync { client.adapters.map(BluetoothAdapter.init) }
    }

    /// The devices bluetoothd has on our adapter, or only those it keeps a bond with
    /// (`Bonded`, or `Paired` where bluetoothd reports no `Bonded`: before 5.68).
    func retrieveKnownPeripherals(bondedOnly: Bool) -> [Peripheral] {
        busQueue.sync {
            client.devices.filter { !bondedOnly || $0.1.bonded }.map { peripheral(for: $0.0, $0.1) }
        }
    }

    /// Devices connected to our adapter (by this or another process) that have one of `services`.
    func retrieveConnectedPeripherals(withServices services: [BluetoothUUID]) -> [Peripheral] {
        let wanted = Set(services)
        return busQueue.sync {
            client.devices.filter { id, device in
                // A link we made counts even when bluetoothd never signalled Connected (BlueZ 5.66).
                (device.connected || links[id]?.phase == .connected)
                    && device.uuids.contains { BluetoothUUID(parsing: $0).map(wanted.contains) ?? false }
            }.map { peripheral(for: $0.0, $0.1) }
        }
    }

    /// The last RSSI bluetoothd reported for the peripheral, kept after
    /// bluetoothd invalidates it when discovery stops (on the queue).
    func lastRSSI(of peripheral: Peripheral) -> Int16? {
        client.device(peripheral.deviceID)?.rssi ?? lastSeenRSSI[peripheral.deviceID]
    }

    private func peripheral(for id: DeviceID, _ device: BlueZDeviceProperties) -> Peripheral {
        if let existing = peripherals[id] {
            if existing.addressType == nil { existing.update(address: device.address, type: device.addressType) }
            return existing
        }
        if let kept = forgotten.removeValue(forKey: id)?.peripheral {
            peripherals[id] = kept
            knownNames[id] = device.name
            return kept
        }
        let identifier = PeripheralIdentity.identifier(
            adapterAddress: adapterAddress, deviceAddress: device.address ?? "\(id)")
        let peripheral = Peripheral(identifier: identifier, deviceID: id, name: device.name, engine: self)
        peripheral.update(address: device.address, type: device.addressType)
        peripherals[id] = peripheral
        knownNames[id] = device.name
        return peripheral
    }

    /// Core Bluetooth's advertisement data from BlueZ's Device1 properties.
    ///
    /// `isConnectable` is always true: bluetoothd keeps whether an advertisement was connectable
    /// to itself (no `Device1` property says it, 5.66 to 5.87), and code that connects only to
    /// peripherals advertising as connectable must still connect. A connection to one that is
    /// not stays pending, as with a peripheral out of range.
    static func advertisementData(_ device: BlueZDeviceProperties) -> AdvertisementData {
        var manufacturer: Data? = nil
        if let (company, payload) = device.manufacturerData.min(by: { $0.key < $1.key }) {
            manufacturer = Data([UInt8(company & 0xFF), UInt8(company >> 8)] + payload)
        }
        var serviceData: [BluetoothUUID: Data] = [:]
        for (uuid, bytes) in device.serviceData {
            if let key = BluetoothUUID(parsing: uuid) { serviceData[key] = Data(bytes) }
        }
        return AdvertisementData(
            localName: device.name,
            manufacturerData: manufacturer,
            serviceData: serviceData,
            serviceUUIDs: device.uuids.compactMap(BluetoothUUID.init(parsing:)),
            txPowerLevel: device.txPower.map(Int.init),
            isConnectable: true,
            solicitedServiceUUIDs: solicited(device.advertisingData))
    }

    /// bluetoothd's `Pattern` rule (`device_is_discoverable` in `src/adapter.c`, 5.54 to 5.87):
    /// the empty pattern, or a byte-wise prefix of the device's address (`AA:BB:…`, upper case)
    /// or of its name.
    static func matches(pattern: String, _ device: BlueZDeviceProperties) -> Bool {
        let prefix = Array(pattern.utf8)
        return prefix.isEmpty || device.address.map { $0.utf8.starts(with: prefix) } == true
            || device.name.map { $0.utf8.starts(with: prefix) } == true
    }

    /// Solicited service UUIDs from raw advertising data (AD types 0x14, 0x15, 0x1F).
    static func solicited(_ advertisingData: [UInt8: [UInt8]]) -> [BluetoothUUID] {
        var uuids: [BluetoothUUID] = []
        for (type, width) in [(UInt8(0x14), 2), (0x1F, 4), (0x15, 16)] {
            guard let bytes = advertisingData[type], bytes.count % width == 0 else { continue }
            for start in stride(from: 0, to: bytes.count, by: width) {
                // AD fields are little-endian; BluetoothUUID's data is big-endian.
                if let uuid = BluetoothUUID(parsing: Data(bytes[start..<start + width].reversed())) {
                    uuids.append(uuid)
                }
            }
        }
        return uuids
    }
}
