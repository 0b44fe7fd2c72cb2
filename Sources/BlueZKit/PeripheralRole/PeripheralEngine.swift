import BlueZ
import Dispatch

/// Where the peripheral manager's state lives and its work runs: the bus queue, the serial queue
/// its D-Bus connection works on, as the central's engine does.
///
/// The queue is made with the manager, before the bus is reached (`BlueZBus.connect(queue:)`),
/// so services added and advertising asked for before bluetoothd answered have a home too.
/// Everything that touches ``PeripheralManager/EngineState`` runs on the queue:
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
/// The invariant behind `@unchecked Sendable`: `state` is read and written on `busQueue` only.
final class PeripheralEngine: @unchecked Sendable {
    /// The queue the manager's D-Bus connection, its exported objects and its state live on.
    let busQueue: DispatchQueue
    /// `busQueue` as a task executor (``onBusQueue(_:)``).
    let busExecutor: any TaskExecutor
    /// Service changes and republishing, one after the other, on the bus queue.
    let changes: SerialTaskChain
    private var state = PeripheralManager.EngineState()
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

    init(label: String) {
        busQueue = DispatchQueue(label: label)
        busExecutor = BlueZBus.executor(for: busQueue)
        changes = SerialTaskChain(executor: busExecutor)
        busQueue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
    }

    /// Whether the caller runs on the bus queue.
    var isOnBusQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) }

    /// Runs `body` with the state, on the bus queue: directly when the caller is there, otherwise
    /// as a block the caller waits for. Must not be called from a block the bus queue waits for.
    func sync<Result>(_ body: (inout PeripheralManager.EngineState) -> Result) -> Result {
        if isOnBusQueue { return body(&state) }
        return busQueue.sync { body(&state) }
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
}
