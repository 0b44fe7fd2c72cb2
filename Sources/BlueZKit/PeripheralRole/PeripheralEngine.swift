import BlueZ
import Dispatch
import Locking

/// Where the peripheral manager's state lives and its work runs: the bus queue, the serial queue
/// its D-Bus connection works on, as the central's engine does.
///
/// The queue is made with the manager, before the bus is reached (`BlueZBus.connect(queue:)`),
/// so services added and advertising asked for before bluetoothd answered have a home too.
/// Everything that touches ``State`` runs on the queue (``state`` checks it on every access):
/// - bluetoothd's calls to our exported objects (reads, writes, `StartNotify`, sockets) and the
///   client's events arrive on it;
/// - asynchronous work (registering services, advertising) runs in tasks on ``busExecutor``,
///   so it reads and writes the state directly between its `await`s;
/// - the app's calls (any thread) enter with ``sync(_:)``, which runs the block on the queue and
///   waits for it (directly when already there);
/// - timers (back-pressure, indication confirmations) fire on it.
///
/// Nothing on the queue waits for another queue, so the app's `sync` cannot deadlock; delegate
/// calls go to the manager's queue with `async`.
///
/// `Sendable` as the compiler checks it: every stored property is a `let` of a `Sendable` type,
/// the state a ``QueueBound`` on `busQueue`.
final class PeripheralEngine: Sendable {
    /// The queue the manager's D-Bus connection, its exported objects and its state live on.
    let busQueue: DispatchQueue
    /// `busQueue` as a task executor (``onBusQueue(_:)``).
    let busExecutor: any TaskExecutor
    /// Service changes and republishing, one after the other, on the bus queue.
    let changes: SerialTaskChain
    /// What the manager knows and has published, bound to `busQueue`.
    let state: QueueBound<State>
    /// Whether an advertisement is registered, as the state says, for any thread: set in the
    /// same bus-queue block as the state's `isAdvertising`.
    let isAdvertising: PosixMutex<Bool>
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

    init(label: String) {
        busQueue = DispatchQueue(label: label)
        isAdvertising = PosixMutex(false)
        state = QueueBound(State(advertisingSnapshot: isAdvertising), queue: busQueue)
        busExecutor = BlueZBus.executor(for: busQueue)
        changes = SerialTaskChain(executor: busExecutor)
        busQueue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
    }

    /// Makes `manager` the one this engine reports to; before any other work reaches the queue.
    func attach(_ manager: PeripheralManager) {
        busQueue.async { self.state.value.manager = manager }
    }

    /// The manager this engine works for; nil once released. Any thread (as ``sync(_:)``).
    var manager: PeripheralManager? { sync { $0.manager } }

    /// Whether the caller runs on the bus queue.
    var isOnBusQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) }

    /// Runs `body` with the state, on the bus queue: directly when the caller is there, otherwise
    /// as a block the caller waits for. Must not be called from a block the bus queue waits for.
    func sync<Result>(_ body: (inout State) -> Result) -> Result {
        if isOnBusQueue { return body(&state.value) }
        return busQueue.sync { body(&state.value) }
    }

    /// Runs `body` on the bus queue (as ``sync(_:)``), for work that calls the BlueZ layer.
    func run<Result>(_ body: () -> Result) -> Result {
        if isOnBusQueue { return body() }
        return busQueue.sync(execute: body)
    }

    /// Runs `operation` in a task on the bus queue: between its suspension points it may touch the
    /// state (through ``sync(_:)``, which then runs directly) and BlueZ's queue-confined objects.
    @discardableResult
    func onBusQueue(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        Task(executorPreference: busExecutor, operation: operation)
    }

    /// What the manager knows and has published, on the bus queue.
    struct State {
        /// The manager this engine works for, which delivers its events (``PeripheralManager/post(_:)``).
        weak var manager: PeripheralManager?
        /// bluetoothd's and the adapter's presence, and the state they give.
        var presence = AdapterPresence()
        var client: BlueZClient?
        /// The just-works pairing agent, registered whenever bluetoothd appears on the bus.
        var agent: BlueZAgent?
        /// The adapter's address as last reported.
        var adapterAddress: String { presence.adapterAddress }
        /// Whether the lost-write-results warning was logged (once per manager).
        var warnedOfLostWriteResults = false
        var applications: [ObjectIdentifier: BlueZGattApplication] = [:]
        var characteristics: [ObjectIdentifier: (BlueZGattApplication, BlueZGattApplication.CharacteristicID)] = [:]
        var nextApplication = 0
        /// Which application carries which included service (see `PeripheralManager+IncludedServices`).
        var inclusion = PeripheralManager.IncludedServicesState()
        var advertisement: BlueZAdvertisement?
        var isAdvertising = false {
            didSet { advertisingSnapshot.withLock { [isAdvertising] in $0 = isAdvertising } }
        }
        /// ``isAdvertising`` for the app's threads (``PeripheralEngine/isAdvertising``).
        let advertisingSnapshot: PosixMutex<Bool>
        /// A `startAdvertising` is registering its advertisement: a second one is refused meanwhile.
        var isStartingAdvertising = false
        /// Counts `stopAdvertising()` calls: a registration that finds it changed was stopped
        /// while it registered, and takes its advertisement back.
        var advertisingStops = 0
        /// `advertise` calls under way, until their callers reported them (`advertisingReported()`).
        var advertisementsRegistering = 0
        /// What waits until no advertisement is registering (an async stop).
        var whenAdvertisingSettles: [@Sendable () -> Void] = []
        /// Who is connected and subscribed (see `CentralSubscriptions`).
        var subscriptions = CentralSubscriptions()
        /// Bonded centrals' subscriptions, kept across their links (see `BondedSubscriptions`).
        var bonded = BondedSubscriptions()
        /// Characteristics that had subscribers, to report them when links drop.
        var published: [ObjectIdentifier: MutableCharacteristic] = [:]
        /// Characteristics registered with `AcquireNotify` (bluetoothd with per-device sockets):
        /// their subscribers are exactly the centrals with a socket in `notifyLinks`.
        var socketCharacteristics: Set<ObjectIdentifier> = []
        /// The notify socket of each subscribed central, by characteristic and central address.
        var notifyLinks: [ObjectIdentifier: [String: BlueZNotifyLink]] = [:]
        /// bluetoothd wrote a confirmation to a socket: it is ≥ 5.80, and indications sent through
        /// sockets wait for their centrals' confirmations.
        var socketConfirmationsSeen = false
        /// Sockets that were full when `updateValue` returned false, each waited for until it has room.
        var socketRoomWaits: Set<ObjectIdentifier> = []
        /// Polls the backlog after `updateValue` returned false.
        var roomTimer: (any DispatchSourceTimer)?
        /// Ends a wait for indication confirmations that never came, by the wait's generation.
        var confirmationTimers: [Int: any DispatchSourceTimer] = [:]
        /// How long an indication waits for its confirmations: ATT's transaction timeout.
        var confirmationTimeout: Duration = .seconds(30)
        /// The services added (in order) and the advertisement wanted, to publish again after
        /// bluetoothd or the adapter came back.
        var services: [MutableService] = []
        var wantedAdvertisement: BlueZAdvertisement.Content?
        /// What is advertised, as saved for restoration.
        var advertisementData: AdvertisementData?
        /// Linux: the advertising options it was started with, saved with it; nil for none.
        var advertisingOptions: AdvertisingOptions?
        /// bluetoothd or the adapter went away since the last registration: registrations are gone.
        var registrationsLost = false
        /// Registrations made again after they failed (see `PeripheralManager+PublishRetry`).
        var publishRetry = PublishRetryState()
        /// Restored characteristics whose saved subscribers are still to be reported gone.
        var restoredSubscriptions: [MutableCharacteristic] = []
        /// How long a read or write waits for the app's answer before it is answered with
        /// `unlikelyError` (bluetoothd itself gives up after D-Bus's 25 s and answers the central
        /// with an unhelpful error).
        var requestTimeout: Duration = .seconds(20)
    }
}
