import BlueZ
public import Dispatch
public import Foundation
import Locking

/// Scans for and connects to remote peripherals: Core Bluetooth's `CBCentralManager` on BlueZ.
///
/// Each manager owns one private connection to the system bus
/// (`DBUS_SYSTEM_BUS_ADDRESS` redirects it) and follows bluetoothd and the
/// chosen adapter. When the bus is lost (a `dbus-daemon` restart) or cannot be
/// reached at start, the state is ``ManagerState/resetting`` while the manager
/// connects again with back-off (100 ms doubling to 15 s, then every 15 s); it then
/// recovers as after a bluetoothd restart. Delegate methods run on `queue`, in order; `state`,
/// `isScanning` and peripherals' properties are updated on that queue right
/// before the delegate call that reports the change. Methods may be called
/// from any thread.
///
/// `Sendable` as the compiler checks it: every stored property is a `let`; the manager's
/// mutable state and its delegate sit behind `PosixMutex`es, the engine's own state on its
/// connection's queue (`CentralEngine`).
public final class CentralManager: Sendable {
    /// The queue delegate methods are called on.
    public let queue: DispatchQueue
    /// The options the manager was created with.
    public let options: CentralManagerOptions
    let shared = PosixMutex(Shared())
    // The delegate, held weakly and typed (a cast from `AnyObject` on every event would cost a
    // conformance lookup), behind its own lock.
    private let delegateReference: WeakDelegate<DelegateReference>

    /// The delegate, held weakly.
    private struct DelegateReference {
        weak var object: (any CentralManagerDelegate)?
    }
    /// Saving and restoring state, when created with a restore identifier.
    let restoration: ManagerRestoration<CentralRestorationRecord>?
    /// Callers of the async API waiting for events.
    let waiters = AsyncWaiters()
    /// Events and notifications on their way to `queue`, in order and bounded.
    let deliveries = CentralDeliveryBacklog()
    /// Linux: the manager's pairing agent; its delegate decides pairings (see ``PairingAgent``).
    public let pairingAgent: PairingAgent
    /// The consumers of ``states()`` (CentralManager+Streams.swift).
    let stateStreams = StreamBroadcast<ManagerState>(
        bufferingNewest: CentralManager.streamBufferLimit, current: .unknown)
    /// The consumers of ``disconnections()`` (CentralManager+Streams.swift).
    let disconnectionStreams = StreamBroadcast<Disconnection>(bufferingNewest: CentralManager.streamBufferLimit)

    struct Shared {
        var state: ManagerState = .unknown
        var isScanning = false
        var engine: CentralEngine?
        var scanStreams: [UInt64: AsyncStream<Discovery>.Continuation] = [:]
        var nextStreamID: UInt64 = 0
        /// Peripherals with a pending or established connection, in request order (saved for
        /// restoration): a projection of the engine's `links` (see ``CentralEngine/Link``), written
        /// only where `.link` and `.restored` events are applied.
        var linked: [Peripheral] = []
        /// The scan running, as saved for restoration.
        var scan: CentralRestorationRecord.Scan?
        /// A scan to resume once the state is `.poweredOn` again: restored, or running when
        /// bluetoothd or the adapter went away.
        var scanToResume: CentralRestorationRecord.Scan?
    }

    /// Creates a manager; its state is `.unknown` until the first ``CentralManagerDelegate/centralManagerDidUpdateState(_:)``.
    ///
    /// - Parameters:
    ///   - delegate: receives events; held weakly.
    ///   - queue: the queue for delegate calls; nil for the main queue.
    ///   - options: Core Bluetooth's options plus Linux's adapter and bus choices.
    public init(
        delegate: (any CentralManagerDelegate)?, queue: DispatchQueue?, options: CentralManagerOptions = .init()
    ) {
        self.queue = queue ?? .main
        self.options = options
        self.pairingAgent = PairingAgent(queue: queue ?? .main)
        self.restoration = options.restoreIdentifier.map {
            ManagerRestoration(identifier: $0, store: options.restorationStore ?? .standard, role: .central)
        }
        delegateReference = WeakDelegate(DelegateReference(object: delegate))
        // The connect loop holds the manager weakly: a released manager stops it.
        Task { [weak self, options] in
            guard self?.refusedByRestoration() == false else { return }
            let bus = await BlueZBus.connect(
                address: options.busAddress, label: "bluezkit.central", isWanted: { [weak self] in self != nil }
            ) { [weak self] error, attempt in
                self?.busUnreachable(error, attempt: attempt)
            }
            guard let bus else { return }
            await self?.start(on: bus)
        }
    }

    /// Creates a manager with Core Bluetooth's option dictionary (`CBCentralManagerOption…Key`).
    public convenience init(delegate: (any CentralManagerDelegate)?, queue: DispatchQueue?, options: [String: Any]?) {
        self.init(delegate: delegate, queue: queue, options: CentralManagerOptions(dictionary: options ?? [:]))
    }

    /// The object that receives events, held weakly.
    public var delegate: (any CentralManagerDelegate)? {
        get { delegateReference.value.object }
        set { delegateReference.value = DelegateReference(object: newValue) }
    }

    /// Whether the adapter can be used: `.poweredOn` when bluetoothd runs and the adapter is powered.
    ///
    /// `.unsupported` when bluetoothd or the chosen adapter is missing,
    /// `.resetting` while bluetoothd is gone after having been present,
    /// `.unauthorized` when the bus refuses us (D-Bus `AccessDenied`).
    public var state: ManagerState { shared.withLock { $0.state } }

    /// Whether this process may use Bluetooth (`CBManager.authorization`, iOS 13): ``ManagerAuthorization/denied``
    /// when the bus refuses this manager (``state`` `.unauthorized`), ``ManagerAuthorization/allowedAlways``
    /// once it read bluetoothd's objects, else what another manager of the process learned
    /// (``Manager/authorization``). Any thread.
    public var authorization: ManagerAuthorization { Manager.authorization(in: state) }

    /// Whether a scan is running.
    public var isScanning: Bool { shared.withLock { $0.isScanning } }

    // MARK: Scanning

    /// Starts scanning for peripherals that advertise any of `serviceUUIDs` (all peripherals when nil).
    ///
    /// Calls `Adapter1.SetDiscoveryFilter` (the UUIDs, `Transport` "le",
    /// `DuplicateData`, and the Linux extras) and `Adapter1.StartDiscovery`.
    /// BlueZ merges the filters of all its clients, so results are filtered
    /// here again. A device that BlueZ remembers from an earlier scan is
    /// reported only once an advertisement from it is received. A second call
    /// replaces the first one's parameters. Ignored, with a log line, unless
    /// the state is `.poweredOn`; BlueZ errors are logged (Core Bluetooth has
    /// no scan error callback).
    public func scanForPeripherals(withServices serviceUUIDs: [BluetoothUUID]?, options: ScanOptions = .init()) {
        guard let engine = readyEngine(for: "scanForPeripherals") else { return }
        shared.withLock { state in
            state.isScanning = true
            state.scan = CentralRestorationRecord.Scan(services: serviceUUIDs, options: options)
        }
        engine.startScan(services: serviceUUIDs, options: options)
        saveStateSoon()
    }

    /// Starts scanning with Core Bluetooth's scan option dictionary (`CBCentralManagerScanOption…Key`).
    public func scanForPeripherals(withServices serviceUUIDs: [BluetoothUUID]?, options: [String: Any]?) {
        scanForPeripherals(withServices: serviceUUIDs, options: ScanOptions(dictionary: options))
    }

    /// Stops scanning (`Adapter1.StopDiscovery`); no discovery is reported after this returns.
    public func stopScan() {
        let engine = shared.withLock { state in
            state.isScanning = false
            state.scan = nil
            state.scanToResume = nil
            return state.engine
        }
        engine?.stopScan()
        saveStateSoon()
    }

    /// A discovery reported by the async scan API.
    public struct Discovery: Sendable {
        /// The peripheral.
        public let peripheral: Peripheral
        /// Its advertisement.
        public let advertisementData: AdvertisementData
        /// The received signal strength in dBm.
        public let rssi: Int
    }

    /// The discoveries of scans, as an async sequence, beside the delegate.
    ///
    /// Start a scan with ``scanForPeripherals(withServices:options:)-(_,ScanOptions)``; every
    /// discovery that the delegate sees is also yielded here, in the same
    /// order. The stream ends when the task iterating it is cancelled, or when the manager is
    /// released. It keeps the newest
    /// 256 discoveries that its consumer has not taken yet and drops older ones, so a stream
    /// nobody reads during a long scan holds bounded memory.
    public func discoveries() -> AsyncStream<Discovery> {
        AsyncStream(bufferingPolicy: .bufferingNewest(Self.streamBufferLimit)) { continuation in
            let id = shared.withLock { state in
                state.nextStreamID += 1
                state.scanStreams[state.nextStreamID] = continuation
                return state.nextStreamID
            }
            continuation.onTermination = { [weak self] _ in
                self?.shared.withLock { _ = $0.scanStreams.removeValue(forKey: id) }
            }
        }
    }

    // MARK: Connecting

    /// Connects to `peripheral`; the request never times out.
    ///
    /// Calls `Device1.Connect` and retries it after every failure (timeouts,
    /// `le-connection-abort-by-local`, `InProgress`, the device out of range
    /// or gone from bluetoothd's cache) until it succeeds or
    /// ``cancelPeripheralConnection(_:)`` is called — as in Core Bluetooth, an app may ask to
    /// connect to a device that is away and be told when it comes into range (a door lock
    /// that opens as its owner arrives). ``CentralManagerDelegate/centralManager(_:didConnect:)``
    /// follows a successful `Connect` reply;
    /// ``CentralManagerDelegate/centralManager(_:didFailToConnect:error:)`` only
    /// errors that can never succeed. With ``CBConnectPeripheralOptionEnableAutoReconnect``
    /// set to true, a link that is lost is re-established by the manager (the iOS 17
    /// behaviour): the delegate's `didDisconnectPeripheral(_:timestamp:isReconnecting:error:)`
    /// says `isReconnecting`, the peripheral is `.connecting`, and `didConnect` follows. The
    /// notification keys have no meaning on Linux. The peripheral's `state` is `.connecting`
    /// when this returns (unless it was connected already). Ignored, with a log line, unless
    /// the manager's state is `.poweredOn`.
    public func connect(_ peripheral: Peripheral, options: [String: Any]? = nil) {
        guard let engine = readyEngine(for: "connect") else { return }
        engine.connect(
            peripheral, autoReconnect: options?.flag(CBConnectPeripheralOptionEnableAutoReconnect) ?? false)
        saveStateSoon()
    }

    /// Cancels a pending connection or disconnects an established one (`Device1.Disconnect`).
    ///
    /// The delegate then gets ``CentralManagerDelegate/centralManager(_:didDisconnectPeripheral:error:)``
    /// with a nil error.
    public func cancelPeripheralConnection(_ peripheral: Peripheral) {
        shared.withLock { $0.engine }?.cancelConnection(peripheral)
        saveStateSoon()
    }

    // MARK: Retrieving known peripherals

    /// The peripherals with these identifiers that bluetoothd knows (seen
    /// earlier, or remembered across restarts because they are paired), in
    /// the order asked; unknown identifiers are left out.
    ///
    /// Reads bluetoothd's `Device1` objects under the adapter; empty before the
    /// state is `.poweredOn`. Must not be called on the manager's own D-Bus queue.
    public func retrievePeripherals(withIdentifiers identifiers: [UUID]) -> [Peripheral] {
        shared.withLock { $0.engine }?.retrievePeripherals(withIdentifiers: identifiers) ?? []
    }

    /// Linux: the machine's Bluetooth adapters, as bluetoothd reports them, by name; the one this
    /// manager uses has ``BluetoothAdapter/isInUse``. Empty while bluetoothd is away. Must not be
    /// called on the manager's D-Bus queue.
    public var adapters: [BluetoothAdapter] {
        shared.withLock { $0.engine }?.adapters ?? []
    }

    /// The peripherals connected to the adapter — by this process or another
    /// one — that offer any of `serviceUUIDs` (`Device1` with `Connected` and the UUIDs).
    ///
    /// Connect to one with ``connect(_:options:)`` to use it from this manager.
    public func retrieveConnectedPeripherals(withServices serviceUUIDs: [BluetoothUUID]) -> [Peripheral] {
        shared.withLock { $0.engine }?.retrieveConnectedPeripherals(withServices: serviceUUIDs) ?? []
    }

    // MARK: Events (internal router)

    /// What the engine reports; applied on `queue`.
    enum Event: Sendable {
        case state(ManagerState)
        case discovered(Peripheral, AdvertisementData, rssi: Int, name: String?)
        case link(Peripheral, LinkEvent)
        case gatt(Peripheral, GattEvent)
        /// Saved state was restored: `willRestoreState` comes first.
        case restored([Peripheral], CentralRestorationRecord.Scan?)
    }

    /// A GATT result for a peripheral's delegate.
    enum GattEvent: Sendable {
        case services([Service], (any Error)?)
        /// The peripheral's database changed; these services are invalid now (may be empty).
        case modifiedServices([Service])
        case includedServices(Service, [Service], (any Error)?)
        case characteristics(Service, [Characteristic], (any Error)?)
        case descriptors(Characteristic, [Descriptor], (any Error)?)
        case value(Characteristic, Data?, (any Error)?)
        case descriptorValue(Descriptor, Data?, (any Error)?)
        /// A write with response's result; `request` names the async call waiting for it (none
        /// for ``Peripheral/writeValue(_:for:type:)``).
        case wrote(Characteristic, (any Error)?, request: UInt64? = nil)
        case wroteDescriptor(Descriptor, (any Error)?, request: UInt64? = nil)
        case notifyState(Characteristic, Bool, (any Error)?)
        case rssi(Int, (any Error)?)
        /// The device's name changed (`Device1.Name`, from an advertisement or the GAP service).
        case name(String)
        /// Writes without response that waited have gone out.
        case readyToSendWriteWithoutResponse
        /// bluetoothd's reading of the peripheral's battery level changed (`Battery1`).
        case batteryLevel(Int?)
    }

    /// A change of a peripheral's connection.
    enum LinkEvent: Sendable {
        case connecting, connected, disconnecting
        /// A restored link that bluetoothd kept up while no process used it: taken over silently.
        case adopted
        case failed(BluetoothError)
        case disconnected(BluetoothError?)
        /// The link was lost and, with `EnableAutoReconnect`, is being re-established.
        case disconnectedReconnecting(BluetoothError)

        /// Whether this is ``disconnectedReconnecting(_:)``.
        var isReconnecting: Bool {
            if case .disconnectedReconnecting = self { return true }
            return false
        }
    }

    /// Applies `event` on `queue`, after what was posted before it: model state first, then the
    /// delegate and the streams (through ``deliveries``; a discovery may be dropped there).
    func post(_ event: Event) {
        enqueue(.event(event))
    }

    /// Hands `entry` to the backlog, and a drain to `queue` unless one is on its way already.
    ///
    /// On one of the connection's reading threads (a notification, any event handled as it is
    /// read) the drain runs on that thread once it has left the connection's queue, inside
    /// `queue.sync`: one thread wake-up per value instead of two (the reading thread's, then a
    /// worker's for `queue`). Not for the main queue, whose blocks only the main thread runs.
    /// While the app keeps `queue` busy that thread waits there and the connection's other
    /// reading thread reads on, so what arrives meanwhile waits here, within the backlog's
    /// bounds, as with `async` (one drain is on its way at a time: only one thread waits).
    /// Anywhere else the drain goes to `queue` with `async`.
    private func enqueue(_ entry: consuming CentralDeliveryBacklog.Entry) {
        let admission = deliveries.add(entry)
        if admission.firstDrop {
            BlueZLog.warning(
                "the delegate queue falls behind: waiting notifications (\(CentralDeliveryBacklog.notificationLimit) "
                    + "per characteristic) or discoveries (\(CentralDeliveryBacklog.discoveryLimit) per peripheral) "
                    + "are dropped, oldest first")
        }
        guard admission.startDrain else { return }
        if queue !== DispatchQueue.main, BlueZClient.runAfterBusEvent({ [self] in queue.sync { drainDeliveries() } }) {
            return
        }
        queue.async { [self] in drainDeliveries() }
    }

    /// Delivers what waits, in order, on `queue`; after 64 entries it yields the queue to other
    /// work and continues in a new block.
    private func drainDeliveries() {
        for _ in 0..<64 {
            let (entry, dropped) = deliveries.next()
            guard let entry else {
                if dropped > 0 { BlueZLog.warning("\(dropped) notifications or discoveries were dropped") }
                return
            }
            switch entry {
            case .event(let event): apply(event)
            case .notification(let value, let characteristic, let peripheral):
                deliverNotification(value, of: characteristic, from: peripheral)
            }
        }
        queue.async { [self] in drainDeliveries() }
    }

    /// Applies `event` (on `queue`).
    private func apply(_ event: Event) {
        switch event {
        case .state(let newState):
            Manager.learn(from: newState)
            shared.withLock { shared in
                shared.state = newState
                if newState != .poweredOn && shared.isScanning {
                    // The scan ends with bluetoothd or the adapter; it resumes when they are back.
                    shared.isScanning = false
                    shared.scanToResume = shared.scan
                }
            }
            delegate?.centralManagerDidUpdateState(self)
            stateStreams.send(ifChanged: newState)
            if newState == .poweredOn { resumeRestoredScan() }
        case .restored(let peripherals, let scan):
            deliverRestoredState(peripherals, scan: scan)
        case .discovered(let peripheral, let data, let rssi, let name):
            let (streams, scanning) = shared.withLock { (Array($0.scanStreams.values), $0.isScanning) }
            guard scanning else { return }
            peripheral.update(name: name)
            delegate?.centralManager(
                self, didDiscover: peripheral, advertisementData: data.dictionary, rssi: NSNumber(value: rssi))
            for stream in streams {
                stream.yield(Discovery(peripheral: peripheral, advertisementData: data, rssi: rssi))
            }
        case .link(let peripheral, let change):
            deliver(change, for: peripheral)
            waiters.linkChanged(peripheral, change)
            disconnectionStreams.send(change, of: peripheral)
        case .gatt(let peripheral, let change):
            deliver(change, for: peripheral)
            waiters.gattChanged(change, peripheral: peripheral)
            // Values change nothing that restoration keeps.
            if case .value = change { return }
        }
        saveState()
    }

    /// Posts a notification that arrived on the bus queue (`StartNotify`'s `PropertiesChanged`):
    /// what `post(.gatt(peripheral, .value(…)))` does, through the same backlog in the same
    /// order, without the event's switch. At most 128 values of one characteristic wait; a newer
    /// one drops the oldest (see ``CentralDeliveryBacklog``).
    ///
    /// Read on one of the connection's two reading threads, the value reaches the delegate on
    /// that same thread, in `queue.sync` once the thread has left the connection's queue (see
    /// `enqueue(_:)`): while an app blocks `queue` until a bus call completes, the other reading
    /// thread reads the reply, so that never deadlocks, and at most one reading thread waits on
    /// an app's queue at a time.
    func postNotification(_ value: Data, of characteristic: Characteristic, from peripheral: Peripheral) {
        enqueue(.notification(value, characteristic, peripheral))
    }

    /// Delivers a notification that arrived on the queue itself (an `AcquireNotify` socket read
    /// there): the same as posting `.value`, without the hop. On `queue`.
    func deliverNotification(_ value: Data, of characteristic: Characteristic, from peripheral: Peripheral) {
        deliverValue(value, of: characteristic, from: peripheral, error: nil)
        waiters.valueChanged(of: characteristic, value, nil)
    }

    /// The model and delegate side of `.value`: the characteristic's new value (on success),
    /// then `peripheral(_:didUpdateValueFor:error:)`. On `queue`.
    private func deliverValue(
        _ data: Data?, of characteristic: Characteristic, from peripheral: Peripheral, error: (any Error)?
    ) {
        if let data { characteristic.update(value: data) }
        peripheral.delegate?.peripheral(peripheral, didUpdateValueFor: characteristic, error: error)
    }

    private func deliver(_ change: LinkEvent, for peripheral: Peripheral) {
        project(change, on: peripheral)
        switch change {
        case .connecting, .adopted, .disconnecting: break
        case .connected:
            delegate?.centralManager(self, didConnect: peripheral)
        case .failed(let error):
            delegate?.centralManager(self, didFailToConnect: peripheral, error: error)
        case .disconnected(let error):
            delegate?.centralManager(
                self, didDisconnectPeripheral: peripheral, timestamp: Date().timeIntervalSinceReferenceDate,
                isReconnecting: false, error: error)
        case .disconnectedReconnecting(let error):
            delegate?.centralManager(
                self, didDisconnectPeripheral: peripheral, timestamp: Date().timeIntervalSinceReferenceDate,
                isReconnecting: true, error: error)
        }
    }

    /// Brings the two projections of the engine's link to `change` (on `queue`, right before the
    /// delegate hears of it): the peripheral's ``Peripheral/state`` and `linked`. The only place
    /// either is written, but for `.connecting` at a request (``CentralEngine/connect(_:autoReconnect:)``)
    /// and `linked` at a restoration.
    private func project(_ change: LinkEvent, on peripheral: Peripheral) {
        let state: PeripheralState
        switch change {
        case .connecting: state = .connecting
        case .adopted, .connected: state = .connected
        case .disconnecting: state = .disconnecting
        case .failed: state = .disconnected
        case .disconnected, .disconnectedReconnecting:
            // Services first: code that watches `state` from another thread then sees both.
            peripheral.update(services: nil)
            state = change.isReconnecting ? .connecting : .disconnected
        }
        peripheral.update(state: state)
        shared.withLock { shared in
            if state == .disconnected {
                shared.linked.removeAll { $0 === peripheral }
            } else if !shared.linked.contains(peripheral) {
                shared.linked.append(peripheral)
            }
        }
    }

    private func deliver(_ change: GattEvent, for peripheral: Peripheral) {
        let delegate = peripheral.delegate
        switch change {
        case .services(let services, let error):
            if error == nil {
                var known = peripheral.services ?? []
                for service in services where !known.contains(service) { known.append(service) }
                peripheral.update(services: known)
            }
            delegate?.peripheral(peripheral, didDiscoverServices: error)
        case .modifiedServices(let invalidated):
            if let known = peripheral.services {
                peripheral.update(services: known.filter { !invalidated.contains($0) })
            }
            delegate?.peripheral(peripheral, didModifyServices: invalidated)
        case .includedServices(let service, let included, let error):
            if error == nil { service.setIncludedServices(included) }
            delegate?.peripheral(peripheral, didDiscoverIncludedServicesFor: service, error: error)
        case .characteristics(let service, let found, let error):
            if error == nil {
                var known = service.characteristics ?? []
                for characteristic in found where !known.contains(characteristic) { known.append(characteristic) }
                service.setCharacteristics(known)
            }
            delegate?.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error)
        case .descriptors(let characteristic, let found, let error):
            if error == nil { characteristic.setDescriptors(found) }
            delegate?.peripheral(peripheral, didDiscoverDescriptorsFor: characteristic, error: error)
        case .value(let characteristic, let data, let error):
            deliverValue(data, of: characteristic, from: peripheral, error: error)
        case .descriptorValue(let descriptor, let data, let error):
            if let data { descriptor.update(value: data) }
            delegate?.peripheral(peripheral, didUpdateValueFor: descriptor, error: error)
        case .wrote(let characteristic, let error, _):
            delegate?.peripheral(peripheral, didWriteValueFor: characteristic, error: error)
        case .wroteDescriptor(let descriptor, let error, _):
            delegate?.peripheral(peripheral, didWriteValueFor: descriptor, error: error)
        case .notifyState(let characteristic, let notifying, let error):
            characteristic.update(notifying: notifying)
            delegate?.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
        case .rssi(let rssi, let error):
            delegate?.peripheral(peripheral, didReadRSSI: NSNumber(value: rssi), error: error)
        case .name(let name):
            peripheral.update(name: name)
            delegate?.peripheralDidUpdateName(peripheral)
        case .readyToSendWriteWithoutResponse:
            delegate?.peripheralIsReady(toSendWriteWithoutResponse: peripheral)
        case .batteryLevel(let level):
            guard peripheral.batteryLevel != level else { return }
            peripheral.update(batteryLevel: level)
            delegate?.peripheral(peripheral, didUpdateBatteryLevel: level)
        }
    }

    private func readyEngine(for call: String) -> CentralEngine? {
        let (engine, state) = shared.withLock { ($0.engine, $0.state) }
        guard let engine, state == .poweredOn else {
            BlueZLog.warning("CentralManager.\(call) ignored: the state is \(state), not poweredOn")
            return nil
        }
        return engine
    }

    // MARK: Start

    /// Whether another live manager holds this restore identifier; then the state is
    /// `.unsupported` for good (see ``restorationError``).
    private func refusedByRestoration() -> Bool {
        guard restoration?.isRefused == true else { return false }
        post(.state(.unsupported))
        return true
    }

    /// The bus cannot be reached (yet): see ``ManagerState/whileUnreachable(_:attempt:)``.
    private func busUnreachable(_ error: BlueZError, attempt: Int) {
        if let state = ManagerState.whileUnreachable(error, attempt: attempt) { post(.state(state)) }
    }

    private func start(on bus: BlueZBus) async {
        let engine = CentralEngine(
            manager: self, bus: bus, adapter: options.adapter,
            pairingAgent: options.registersDefaultAgent,
            usesNotifySockets: options.usesNotifySockets)
        shared.withLock { $0.engine = engine }
        if let agent = engine.agent {
            await pairingAgent.attach(agent) { [weak engine] device in engine?.pairingPeer(device) }
        }
        if let saved = restoration?.takeSavedState() {
            post(.restored(engine.restore(saved), saved.scan))
        }
        do throws(BlueZError) {
            try await engine.start()
        } catch {
            BlueZLog.warning("CentralManager cannot follow bluetoothd: \(error)")
            post(.state(error.code == .accessDenied ? .unauthorized : .unsupported))
        }
    }

    deinit {
        let (engine, discoveries) = shared.withLock { ($0.engine, Array($0.scanStreams.values)) }
        engine?.close()
        // What the async API handed out ends with the manager: no event can reach it any more.
        for stream in discoveries { stream.finish() }
        stateStreams.finish()
        disconnectionStreams.finish()
        waiters.close(BluetoothError(.notConnected, message: "the central manager is gone"))
    }
}
