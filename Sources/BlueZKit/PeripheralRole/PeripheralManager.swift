import BlueZ
public import Dispatch
import Foundation
import Locking

/// Publishes services and advertises them: Core Bluetooth's `CBPeripheralManager` on BlueZ.
///
/// Each added service becomes one GATT application (`GattManager1.RegisterApplication`),
/// so add and remove map one to one; advertising registers an
/// `LEAdvertisement1` (`LEAdvertisingManager1.RegisterAdvertisement`). Our
/// exported objects answer only bluetoothd. Delegate methods run on `queue`;
/// methods may be called from any thread.
///
/// Where bluetoothd opens one notification socket per subscribing central (BlueZ 5.79 and later),
/// every characteristic that notifies or indicates offers `AcquireNotify`: subscriptions are
/// reported for the exact central, and ``updateValue(_:for:onSubscribedCentrals:)`` writes to the
/// sockets of the centrals named, with back-pressure per central. On older bluetoothd (5.66),
/// subscriptions are attributed as well as BlueZ lets us
/// (see ``PeripheralManagerDelegate/peripheralManager(_:central:didSubscribeTo:)-(_,_,Characteristic)``),
/// and `updateValue` reaches every subscriber and pushes back when the bus is not keeping up or,
/// for a characteristic that only indicates, until the centrals confirmed the previous value.
/// Published services and the advertisement are registered again
/// when bluetoothd, the system bus (the manager connects again by itself, `.resetting` meanwhile)
/// or the adapter comes back, and restored across processes with a restore
/// identifier. Pairing prompts go to ``pairingAgentDelegate``.
///
/// On bluetoothd before 5.79 the characteristics offer neither `AcquireNotify` nor `AcquireWrite`,
/// on purpose: BlueZ 5.66 opens one notification socket per characteristic for the first
/// subscriber and counts later ones silently, where `StartNotify` is called for each central that
/// subscribes. bluetoothd publishes no version: `Adapter1.Connectable` (5.79) is the probe.
///
/// L2CAP channels (``publishL2CAPChannel(withEncryption:)``) are kernel sockets beside
/// bluetoothd, not D-Bus: their listening sockets accept, and their channels read and write, on
/// one serial queue of the manager's own (`L2CAPPublications.queue`), never on the bus queue, so
/// bulk data does not delay bluetoothd's requests; their delegate calls still come on `queue`.
///
/// `Sendable` as the compiler checks it: the manager is a façade of `let`s. Its work and state
/// are the engine's (`PeripheralEngine`, on the bus queue); what the app reads synchronously (the
/// state, the delegate, the request streams) sits behind `PosixMutex`es; delegate calls go
/// through one `post(_:)` (`PeripheralManager+Events.swift`).
public final class PeripheralManager: Sendable {
    /// The queue delegate methods are called on.
    public let queue: DispatchQueue
    /// The options the manager was created with.
    public let options: PeripheralManagerOptions
    /// The delegate, held weakly and typed (a cast from `AnyObject` on every event would cost a
    /// conformance lookup), behind its own lock: any thread sets it.
    private let delegateReference: WeakDelegate<DelegateReference>

    /// The delegate, held weakly.
    private struct DelegateReference {
        weak var object: (any PeripheralManagerDelegate)?
    }
    /// The state and the work on the bus queue.
    let engine: PeripheralEngine
    /// ``state``, set on `queue` right before the delegate hears of it.
    let reportedState = PosixMutex(ManagerState.unknown)
    /// The consumers of ``requests()``, by stream.
    let requestStreams = PosixMutex(RequestStreams())
    /// The consumers of ``states()`` (PeripheralManager+Streams.swift).
    let stateStreams = StreamBroadcast<ManagerState>(bufferingNewest: 256, current: .unknown)
    /// The consumers of ``subscriptions()`` (PeripheralManager+Streams.swift).
    let subscriptionStreams = StreamBroadcast<Subscription>(bufferingNewest: 256)
    /// Writes without response on their way to `queue`: at most 1024, holding at most 256 KiB.
    let writesWithoutResponse = WriteWithoutResponseBacklog()
    /// Linux: the manager's pairing agent; its delegate decides pairings (see ``PairingAgent``).
    public let pairingAgent: PairingAgent
    /// Saving and restoring state, when created with a restore identifier.
    let restoration: ManagerRestoration<PeripheralRestorationRecord>?
    /// The published L2CAP channels' listening sockets (PeripheralManager+L2CAP.swift).
    let l2cap = L2CAPPublications()
    /// Tasks in ``send(_:for:onSubscribedCentrals:)`` waiting for room (PeripheralManager+Send.swift).
    let updateWaiters = UpdateWaiters()

    /// Creates a manager; its state is `.unknown` until the first delegate call.
    public init(
        delegate: (any PeripheralManagerDelegate)?, queue: DispatchQueue?, options: PeripheralManagerOptions = .init()
    ) {
        self.queue = queue ?? .main
        self.pairingAgent = PairingAgent(queue: queue ?? .main)
        self.options = options
        self.restoration = options.restoreIdentifier.map {
            ManagerRestoration(identifier: $0, store: options.restorationStore ?? .standard, role: .peripheral)
        }
        let engine = PeripheralEngine(label: "bluezkit.peripheral")
        self.engine = engine
        delegateReference = WeakDelegate(DelegateReference(object: delegate))
        engine.attach(self)
        // The connect loop holds the manager weakly: a released manager stops it.
        engine.onBusQueue { [weak self, options] in
            guard self?.refusedByRestoration() == false else { return }
            let bus = await BlueZBus.connect(
                address: options.busAddress, label: "bluezkit.peripheral", queue: engine.busQueue,
                isWanted: { [weak self] in self != nil }
            ) { [weak self] error, attempt in
                self?.busUnreachable(error, attempt: attempt)
            }
            guard let bus else { return }
            await self?.start(on: bus)
        }
    }

    /// Creates a manager with Core Bluetooth's option dictionary.
    public convenience init(delegate: (any PeripheralManagerDelegate)?, queue: DispatchQueue?, options: [String: Any]?)
    {
        self.init(delegate: delegate, queue: queue, options: PeripheralManagerOptions(dictionary: options ?? [:]))
    }

    /// The object that receives events, held weakly.
    public var delegate: (any PeripheralManagerDelegate)? {
        get { delegateReference.value.object }
        set { delegateReference.value = DelegateReference(object: newValue) }
    }

    /// Whether the adapter can be used, as for ``CentralManager/state``.
    public var state: ManagerState { reportedState.withLock { $0 } }

    /// Whether this process may use Bluetooth, as for ``CentralManager/authorization``. Any thread.
    public var authorization: ManagerAuthorization { Manager.authorization(in: state) }

    /// Whether an advertisement is registered with bluetoothd. Any thread: a snapshot the engine
    /// sets in the same bus-queue block that changes it.
    public var isAdvertising: Bool { engine.isAdvertising.withLock { $0 } }

    // MARK: Services

    /// Publishes `service` and its characteristics as one GATT application.
    ///
    /// Exports the objects and calls `GattManager1.RegisterApplication`;
    /// bluetoothd reads them back before it answers. The delegate's `didAdd`
    /// follows, with the BlueZ error as ``BluetoothError`` when it fails, or
    /// ``BluetoothError/Code/invalidParameters`` when its ``MutableService/includedServices``
    /// form a cycle. The application also carries the services it includes (BlueZ resolves
    /// includes only within one application).
    public func add(_ service: MutableService) {
        publish(service)
    }

    /// Unpublishes `service` (`UnregisterApplication`), and takes it out of the applications of
    /// services that include it (they are registered again without it).
    public func remove(_ service: MutableService) {
        unpublish(service)
    }

    /// Unpublishes every service.
    public func removeAllServices() {
        unpublishAll()
    }

    // MARK: Advertising

    /// Starts advertising Core Bluetooth's two keys, the local name
    /// (`CBAdvertisementDataLocalNameKey`) and service UUIDs
    /// (`CBAdvertisementDataServiceUUIDsKey`), plus on Linux manufacturer data,
    /// service data and solicited UUIDs.
    ///
    /// Data that does not fit what bluetoothd takes (31 bytes of a legacy advertisement, flags
    /// included; more from BlueZ 5.79 where the controller does extended advertising) is refused
    /// with ``BluetoothError`` `advertisingDataTooLarge` — never silently cut. The local name is
    /// not counted: bluetoothd sends it in the scan response and shortens it to what fits.
    public func startAdvertising(_ advertisementData: [String: Any]?) {
        let data: AdvertisementData
        do throws(AdvertisementDataError) {
            data = try AdvertisementData(dictionary: advertisementData ?? [:])
        } catch {
            let failure = BluetoothError(.invalidParameters, message: "\(error)")
            return post(.didStartAdvertising(failure, saves: false, done: nil))
        }
        startAdvertising(data)
    }

    /// Starts advertising typed advertisement data.
    ///
    /// While advertising, or while an earlier call is still registering its advertisement, the
    /// delegate gets ``BluetoothError/Code/alreadyAdvertising`` (Core Bluetooth's rule: stop first).
    public func startAdvertising(_ data: AdvertisementData) {
        startAdvertising(data, then: nil)
    }

    /// ``startAdvertising(_:)-(AdvertisementData)``, then `done` with the delegate's error (on the
    /// manager's queue, after the delegate call).
    func startAdvertising(
        _ data: AdvertisementData, options: AdvertisingOptions = .init(),
        then done: (@Sendable ((any Error)?) -> Void)?
    ) {
        if let reason = options.invalidReason {
            return post(
                .didStartAdvertising(BluetoothError(.invalidParameters, message: reason), saves: false, done: done))
        }
        let busy = engine.sync { state in
            guard !state.isAdvertising, !state.isStartingAdvertising else { return true }
            state.isStartingAdvertising = true
            return false
        }
        guard !busy else {
            let failure = BluetoothError(
                .alreadyAdvertising, message: "already advertising: call stopAdvertising() first")
            return post(.didStartAdvertising(failure, saves: false, done: done))
        }
        let content = PeripheralEngine.advertisementContent(data, options: options)
        engine.onBusQueue {
            let error = await self.engine.advertise(content)
            self.engine.sync { state in
                state.isStartingAdvertising = false
                state.isAdvertising = error == nil
                if error == nil {
                    state.advertisementData = data
                    state.advertisingOptions = options.isEmpty ? nil : options
                }
            }
            self.post(.didStartAdvertising(error, saves: true, done: done))
            self.engine.advertisingReported()
        }
    }

    /// Stops advertising (`UnregisterAdvertisement`).
    ///
    /// A `startAdvertising` still registering its advertisement is stopped too: its advertisement
    /// is unregistered as soon as bluetoothd took it, and the delegate's
    /// `peripheralManagerDidStartAdvertising` gets ``BluetoothError/Code/operationCancelled``.
    public func stopAdvertising() {
        stopAdvertising(then: nil)
    }

    /// ``stopAdvertising()``, then `done` on the manager's queue once bluetoothd no longer holds
    /// the advertisement and no registration is under way (one stopped meanwhile has taken its
    /// advertisement back, and its delegate call came first).
    func stopAdvertising(then done: (@Sendable () -> Void)?) {
        let (advertisement, client) = engine.sync { state in
            defer {
                state.advertisingStops += 1
                state.advertisement = nil
                state.isAdvertising = false
                state.wantedAdvertisement = nil
                state.advertisementData = nil
                state.advertisingOptions = nil
            }
            return (state.advertisement, state.client)
        }
        saveStateSoon()
        guard advertisement != nil || done != nil else { return }
        engine.onBusQueue {
            if let advertisement { await advertisement.unregister(from: await self.adapterPath(client)) }
            guard let done else { return }
            self.engine.whenAdvertisingSettles { self.queue.async(execute: done) }
        }
    }

    // MARK: Requests

    /// Answers a read or write request (for a batch of writes, the first one).
    ///
    /// With `.success`, a read is answered with `request.value`. Any other
    /// result becomes the BlueZ error that bluetoothd turns into that ATT
    /// error code (application errors 0x80–0x9F included).
    ///
    /// Linux: a write to a characteristic that has both `.write` and `.writeWithoutResponse`
    /// has been acknowledged already — bluetoothd (5.66 through 5.87) answers every write to
    /// such a characteristic without waiting for the app — so an error given here for it does
    /// not reach the central, which saw the write succeed. To refuse writes, publish the two
    /// kinds as two characteristics. The manager logs a warning the first time it publishes
    /// such a characteristic.
    public func respond(to request: ATTRequest, withResult result: ATTError.Code) {
        request.answer(result)
    }

    // MARK: Internals

    /// Whether another live manager holds this restore identifier (then the state is
    /// `.unsupported` for good, see ``restorationError``); otherwise takes the saved state.
    private func refusedByRestoration() -> Bool {
        if restoration?.isRefused == true {
            setState(.unsupported)
            return true
        }
        if let saved = restoration?.takeSavedState() { restore(saved) }
        return false
    }

    /// The bus cannot be reached (yet): see ``ManagerState/whileUnreachable(_:attempt:)``.
    private func busUnreachable(_ error: BlueZError, attempt: Int) {
        if let state = ManagerState.whileUnreachable(error, attempt: attempt) { setState(state) }
    }

    private func start(on bus: BlueZBus) async {
        // Property changes of adapters and devices only: a central on the same bluetoothd would
        // otherwise wake this manager with each notification it receives.
        let client = BlueZClient(bus: bus, adapter: options.adapter, watching: .adaptersAndDevices) {
            [weak self] event in self?.engine.handle(event)
        }
        let agent = options.registersDefaultAgent ? BlueZAgent(bus: bus) : nil
        engine.sync { state in
            state.client = client
            state.agent = agent
        }
        if let agent { await pairingAgent.attach(agent) { [weak self] device in self?.pairingPeer(device) } }
        do throws(BlueZError) { try await client.start() } catch { setState(.unsupported) }
    }

    private func setState(_ newState: ManagerState) {
        post(.state(newState))
    }

    func adapterPath(_ client: BlueZClient?) async -> BlueZClient.AdapterID? {
        await client?.currentAdapter()
    }

    deinit {
        // No request can reach them any more.
        for stream in requestStreams.withLock({ Array($0.continuations.values) }) { stream.finish() }
        stateStreams.finish()
        subscriptionStreams.finish()
    }
}
