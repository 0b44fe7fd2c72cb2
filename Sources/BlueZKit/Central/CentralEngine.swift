import BlueZ
import Foundation
import Locking

/// The bus side of a central manager: turns BlueZ's events into Core
/// Bluetooth events and posts them to the manager. Never calls user code.
///
/// `Sendable` as the compiler checks it: every stored property is a `let`; what changes lives
/// in ``state``, a ``QueueBound`` that checks on every access that it runs on the bus queue
/// (the client's events arrive there; public calls hop there with `busQueue.async`/`sync` or
/// ``onBusQueue(_:)``). Computed properties forward to its fields (`CentralEngine+State.swift`),
/// so that the extensions read and write `links[id]` as before.
final class CentralEngine: Sendable {
    /// The manager the engine posts to; gone once the app released it.
    weak let manager: CentralManager?
    /// The bus connection's serial queue: where ``state`` is touched.
    let busQueue: DispatchQueue
    let client: BlueZClient
    /// The engine's mutable state, on the bus queue.
    let state: QueueBound<State>
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
        self.state = QueueBound(State(), queue: bus.queue)
        self.discoveryChain = SerialTaskChain(executor: bus.executor)
        self.agent = pairingAgent ? BlueZAgent(bus: bus) : nil
        // The client's events reach the engine through `target`, set on the bus queue once the
        // engine exists; the client reports nothing before `start()`, which comes after.
        let target = QueueBound(WeakEngine(), queue: bus.queue)
        self.client = BlueZClient(bus: bus, adapter: adapter) { event in
            target.value.engine?.handle(event)
        }
        bus.queue.async { [weak self] in target.value.engine = self }
    }

    /// A weak reference to the engine, for the client's event handler.
    private struct WeakEngine {
        weak var engine: CentralEngine?
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
            } catch  where error.code == .inProgress {
                // The scan's start is still unanswered at bluetoothd (its reply was lost to the
                // call's limit): asked again until it is answered, else the session ran on.
                await self.stopLateStartedDiscovery()
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
            noteAdvertisedServices(id, device)
            advertised(id, device)
            sawAdvertisement(id)
        case .deviceChanged(let id, let device, let changed):
            if changed.contains(.uuids) { noteAdvertisedServices(id, device) }
            // Name only: bluetoothd changes Alias with it (in a separate signal) when no alias is set.
            // Compared with the name this engine last knew, not `peripheral.name`: the manager's
            // queue sets that from advertisements too, and may have done so already.
            if changed.contains(.name), let peripheral = peripherals[id], let name = device.name,
                name != knownNames[id]
            {
                knownNames[id] = name
                manager?.post(.gatt(peripheral, .name(name)))
            }
            // A peripheral made from a saved token (restoration) learns its address type here.
            if let peripheral = peripherals[id], peripheral.addressType == nil {
                peripheral.update(address: device.address, type: device.addressType)
            }
            if changed.contains(.connected), !device.connected { linkLost(id) }
            if changed.contains(.servicesResolved), device.servicesResolved {
                servicesResolved(id)
                resubscribeRestored(id)
            }
        case .deviceRemoved(let id):
            scan?.reported[id] = nil
            passiveDeviceRemoved(id)
            lastSeenRSSI[id] = nil
            advertisedServices[id] = nil
            linkLost(id)
            abandonAttempt(id)
            updateBackgroundDiscovery()
            forget(id)
        case .gattObjectsChanged(let id, let removed):
            gattObjectsChanged(id, removed: removed)
        case .valueChanged(let attribute, let bytes):
            valueChanged(attribute, bytes)
        case .batteryChanged(let id, let percentage):
            if let peripheral = peripherals[id] { manager?.post(.gatt(peripheral, .batteryLevel(percentage))) }
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
        let advertised = advertisedServices[id]
        let data = Self.advertisementData(device, serviceUUIDs: advertised ?? [])
        // Core Bluetooth's rule: a peripheral that advertises one of the services, or (with the
        // solicited-services option) solicits one of those, is reported. When what the device
        // advertised is unknown (bluetoothd resolved its services before this engine saw it), the
        // services bluetoothd resolved stand in, so that a known device is still found.
        let candidates = advertised ?? device.uuids.compactMap(BluetoothUUID.init(parsing:))
        let advertisesService = services.map { $0.contains(where: candidates.contains) } ?? true
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

    func peripheral(for id: DeviceID, _ device: BlueZDeviceProperties) -> Peripheral {
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
        peripheral.update(batteryLevel: client.batteryPercentage(id))
        peripherals[id] = peripheral
        knownNames[id] = device.name
        return peripheral
    }
}
