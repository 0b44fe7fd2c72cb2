import Foundation
import Locking
import Synchronization

/// The async/await side of a central manager: callers waiting for a connection, a read, a
/// discovery, and streams of a characteristic's values, resumed from the same events the
/// delegates get (on the manager's queue, after the delegate call).
///
/// The invariant behind `Sendable`: all state sits behind a `PosixMutex`.
final class AsyncWaiters: Sendable {
    typealias Key = ObjectIdentifier

    private struct Waiter<Value: Sendable>: Sendable {
        let id: UInt64
        let continuation: CheckedContinuation<Value, any Error>
    }

    private struct Stream: Sendable {
        let peripheral: Key
        let continuation: AsyncThrowingStream<Data, any Error>.Continuation
    }

    private struct State: Sendable {
        var nextID: UInt64 = 0
        var connects: [Key: [Waiter<Void>]] = [:]
        var reads: [Key: [Waiter<Data>]] = [:]
        var services: [Key: [Waiter<[Service]>]] = [:]
        var characteristics: [Key: [Waiter<[Characteristic]>]] = [:]
        var streams: [Key: [UInt64: Stream]] = [:]
        var descriptorReads: [Key: [Waiter<Data>]] = [:]
        var rssiReads: [Key: [Waiter<Int>]] = [:]
        var includedServices: [Key: [Waiter<[Service]>]] = [:]
        var descriptors: [Key: [Waiter<[Descriptor]>]] = [:]
        var disconnects: [Key: [Waiter<Void>]] = [:]
        /// Tasks waiting for a characteristic's next notification state (`setNotifyValue(_:of:)`),
        /// and the peripheral of each such characteristic: its link's end ends them (the engine
        /// reports no state for a subscription under way when the link ends).
        var notifyStates: [Key: [Waiter<Void>]] = [:]
        var notifyPeripherals: [Key: Key] = [:]
        /// Tasks waiting until a peripheral's writes without response can go at once again.
        var writeRoom: [Key: [Waiter<Void>]] = [:]
        /// Tasks waiting for the result of their write with response, by request (the waiter's
        /// ID, which the write's result event carries).
        var writes: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        /// The waits whose task was cancelled, until they end (``AsyncWaiters/endWait(id:)``): a
        /// cancel can land before its wait is registered, and the registration then ends it.
        var cancelledWaits: Set<UInt64> = []
        /// Why nothing waits any more (the manager was released): later waits and streams end with it.
        var closed: BluetoothError?

        /// The error a wait registered now ends with at once: the manager's release, or its task's cancel.
        func refusal(of id: UInt64) -> (any Error)? {
            if let closed { return closed }
            return cancelledWaits.contains(id) ? CancellationError() : nil
        }
    }

    private let state = PosixMutex(State())
    /// False only when no read and no stream waits for a characteristic's value: then a
    /// notification (every one comes through `gattChanged`) takes no lock. Set under the lock
    /// by each read and stream added; cleared under it by a value that finds none left.
    private let valuesAwaited = Atomic<Bool>(false)

    func makeID() -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
    }

    // MARK: Waiting

    /// Registers a wait on `key` in `table`, or, when its task was cancelled before, ends it
    /// with `CancellationError` (with the manager's release error once it was released).
    /// Returns whether it waits (only then may its request go out).
    @discardableResult
    private func register<Value: Sendable>(
        _ id: UInt64, _ c: CheckedContinuation<Value, any Error>, on key: Key,
        in table: WritableKeyPath<State, [Key: [Waiter<Value>]]>, awaitingValues: Bool = false
    ) -> Bool {
        let refusal = state.withLock { state -> (any Error)? in
            if let refusal = state.refusal(of: id) { return refusal }
            state[keyPath: table][key, default: []].append(Waiter(id: id, continuation: c))
            if awaitingValues { valuesAwaited.store(true, ordering: .releasing) }
            return nil
        }
        if let refusal { c.resume(throwing: refusal) }
        return refusal == nil
    }

    /// The wait `id` is over (its continuation resumed): forgets that its task was cancelled.
    func endWait(id: UInt64) {
        state.withLock { _ = $0.cancelledWaits.remove(id) }
    }

    @discardableResult
    func waitForConnection(of peripheral: Peripheral, id: UInt64, _ c: CheckedContinuation<Void, any Error>) -> Bool {
        register(id, c, on: Key(peripheral), in: \.connects)
    }

    @discardableResult
    func waitForRead(of characteristic: Characteristic, id: UInt64, _ c: CheckedContinuation<Data, any Error>) -> Bool {
        register(id, c, on: Key(characteristic), in: \.reads, awaitingValues: true)
    }

    @discardableResult
    func waitForServices(of peripheral: Peripheral, id: UInt64, _ c: CheckedContinuation<[Service], any Error>) -> Bool
    {
        register(id, c, on: Key(peripheral), in: \.services)
    }

    @discardableResult
    func waitForCharacteristics(
        of service: Service, id: UInt64, _ c: CheckedContinuation<[Characteristic], any Error>
    ) -> Bool {
        register(id, c, on: Key(service), in: \.characteristics)
    }

    @discardableResult
    func waitForRead(of descriptor: Descriptor, id: UInt64, _ c: CheckedContinuation<Data, any Error>) -> Bool {
        register(id, c, on: Key(descriptor), in: \.descriptorReads)
    }

    @discardableResult
    func waitForRSSI(of peripheral: Peripheral, id: UInt64, _ c: CheckedContinuation<Int, any Error>) -> Bool {
        register(id, c, on: Key(peripheral), in: \.rssiReads)
    }

    @discardableResult
    func waitForIncludedServices(of service: Service, id: UInt64, _ c: CheckedContinuation<[Service], any Error>)
        -> Bool
    {
        register(id, c, on: Key(service), in: \.includedServices)
    }

    @discardableResult
    func waitForDescriptors(
        of characteristic: Characteristic, id: UInt64, _ c: CheckedContinuation<[Descriptor], any Error>
    ) -> Bool {
        register(id, c, on: Key(characteristic), in: \.descriptors)
    }

    @discardableResult
    func waitForDisconnection(of peripheral: Peripheral, id: UInt64, _ c: CheckedContinuation<Void, any Error>)
        -> Bool
    {
        register(id, c, on: Key(peripheral), in: \.disconnects)
    }

    @discardableResult
    func waitForNotifyState(
        of characteristic: Characteristic, peripheral: Peripheral, id: UInt64, _ c: CheckedContinuation<Void, any Error>
    ) -> Bool {
        state.withLock { $0.notifyPeripherals[Key(characteristic)] = Key(peripheral) }
        return register(id, c, on: Key(characteristic), in: \.notifyStates)
    }

    /// On the bus queue, right after a write without response was queued and found that writes
    /// wait: the next `readyToSendWriteWithoutResponse` resumes it.
    func waitForWriteRoom(of peripheral: Peripheral, id: UInt64, _ c: CheckedContinuation<Void, any Error>) {
        register(id, c, on: Key(peripheral), in: \.writeRoom)
    }

    /// A task waits for the result of its write with response, the request `id` (the result
    /// event names it). On the bus queue, right before the write.
    func writeStarts(id: UInt64, _ c: CheckedContinuation<Void, any Error>) {
        let refusal = state.withLock { state -> (any Error)? in
            if let refusal = state.refusal(of: id) { return refusal }
            state.writes[id] = c
            return nil
        }
        if let refusal { c.resume(throwing: refusal) }
    }

    func addStream(
        of characteristic: Characteristic, peripheral: Peripheral, id: UInt64,
        _ continuation: AsyncThrowingStream<Data, any Error>.Continuation
    ) {
        let closed = state.withLock { state -> BluetoothError? in
            if let closed = state.closed { return closed }
            state.streams[Key(characteristic), default: [:]][id] = Stream(
                peripheral: Key(peripheral), continuation: continuation)
            valuesAwaited.store(true, ordering: .releasing)
            return nil
        }
        if let closed { continuation.finish(throwing: closed) }
    }

    /// Removes a stream (it ended); returns whether others still follow the characteristic.
    func removeStream(of characteristic: Characteristic, id: UInt64) -> Bool {
        state.withLock { state in
            state.streams[Key(characteristic)]?[id] = nil
            if state.streams[Key(characteristic)]?.isEmpty == true { state.streams[Key(characteristic)] = nil }
            return state.streams[Key(characteristic)] != nil
        }
    }

    /// A waiting task was cancelled: its waiter ends with `CancellationError`; one not registered
    /// yet ends so when it registers.
    func cancel(id: UInt64) {
        state.withLock { state in
            // Until its wait ends (``endWait(id:)``): a registration after this finds it.
            state.cancelledWaits.insert(id)
            Self.cancel(id, in: &state.connects)
            Self.cancel(id, in: &state.reads)
            Self.cancel(id, in: &state.services)
            Self.cancel(id, in: &state.characteristics)
            Self.cancel(id, in: &state.descriptorReads)
            Self.cancel(id, in: &state.rssiReads)
            Self.cancel(id, in: &state.includedServices)
            Self.cancel(id, in: &state.descriptors)
            Self.cancel(id, in: &state.disconnects)
            Self.cancel(id, in: &state.notifyStates)
            Self.cancel(id, in: &state.writeRoom)
            // The write goes on; its result then finds no one.
            state.writes.removeValue(forKey: id)?.resume(throwing: CancellationError())
        }
    }

    private static func cancel<Value>(_ id: UInt64, in table: inout [Key: [Waiter<Value>]]) {
        for (key, waiters) in table {
            guard let index = waiters.firstIndex(where: { $0.id == id }) else { continue }
            waiters[index].continuation.resume(throwing: CancellationError())
            table[key]?.remove(at: index)
        }
    }

    /// The manager was released: every waiting task throws `error`, every stream ends with it,
    /// and so does every wait and stream that comes later (from a `Peripheral` that outlived it).
    func close(_ error: BluetoothError) {
        let streams = state.withLock { state -> [Stream] in
            state.closed = error
            Self.end(&state.connects, error)
            Self.end(&state.reads, error)
            Self.end(&state.services, error)
            Self.end(&state.characteristics, error)
            Self.end(&state.descriptorReads, error)
            Self.end(&state.rssiReads, error)
            Self.end(&state.includedServices, error)
            Self.end(&state.descriptors, error)
            Self.end(&state.disconnects, error)
            Self.end(&state.notifyStates, error)
            state.notifyPeripherals = [:]
            Self.end(&state.writeRoom, error)
            for continuation in state.writes.values { continuation.resume(throwing: error) }
            state.writes = [:]
            defer { state.streams = [:] }
            return state.streams.values.flatMap(\.values)
        }
        // Outside the lock: a stream's end runs its `onTermination`, which takes it.
        for stream in streams { stream.continuation.finish(throwing: error) }
    }

    private static func end<Value>(_ table: inout [Key: [Waiter<Value>]], _ error: any Error) {
        for waiter in table.values.joined() { waiter.continuation.resume(throwing: error) }
        table = [:]
    }

    /// `peripheral` is not connected now: tasks waiting for its disconnection return.
    func alreadyDisconnected(_ peripheral: Peripheral) {
        for waiter in take(Key(peripheral), \.disconnects) { waiter.continuation.resume() }
    }

    // MARK: Events (on the manager's queue)

    func linkChanged(_ peripheral: Peripheral, _ change: CentralManager.LinkEvent) {
        let key = Key(peripheral)
        switch change {
        case .connected:
            for waiter in take(key, \.connects) { waiter.continuation.resume() }
        case .failed(let error):
            for waiter in take(key, \.connects) { waiter.continuation.resume(throwing: error) }
            for waiter in take(key, \.disconnects) { waiter.continuation.resume() }
        case .disconnected(let error):
            let reason = error ?? BluetoothError(.operationCancelled, message: "the connection was cancelled")
            for waiter in take(key, \.connects) { waiter.continuation.resume(throwing: reason) }
            for waiter in take(key, \.disconnects) { waiter.continuation.resume() }
            for waiter in take(key, \.writeRoom) { waiter.continuation.resume(throwing: reason) }
            for waiter in takeNotifyStates(of: key) { waiter.continuation.resume(throwing: reason) }
            endStreams(of: key, reason)
        case .disconnectedReconnecting(let error):
            for waiter in take(key, \.writeRoom) { waiter.continuation.resume(throwing: error) }
            for waiter in takeNotifyStates(of: key) { waiter.continuation.resume(throwing: error) }
            endStreams(of: key, error)
        case .connecting, .adopted, .disconnecting:
            break
        }
    }

    func gattChanged(_ change: CentralManager.GattEvent, peripheral: Peripheral) {
        switch change {
        case .services(let services, let error):
            for waiter in take(Key(peripheral), \.services) { resume(waiter.continuation, services, error) }
        case .characteristics(let service, let found, let error):
            for waiter in take(Key(service), \.characteristics) { resume(waiter.continuation, found, error) }
        case .includedServices(let service, let found, let error):
            for waiter in take(Key(service), \.includedServices) { resume(waiter.continuation, found, error) }
        case .descriptors(let characteristic, let found, let error):
            for waiter in take(Key(characteristic), \.descriptors) { resume(waiter.continuation, found, error) }
        case .readyToSendWriteWithoutResponse:
            for waiter in take(Key(peripheral), \.writeRoom) { waiter.continuation.resume() }
        case .value(let characteristic, let data, let error):
            valueChanged(of: characteristic, data, error)
        case .descriptorValue(let descriptor, let data, let error):
            for waiter in take(Key(descriptor), \.descriptorReads) {
                resume(waiter.continuation, data ?? Data(), error)
            }
        case .wrote(_, let error, let request?), .wroteDescriptor(_, let error, let request?):
            writeFinished(request, error)
        case .rssi(let rssi, let error):
            for waiter in take(Key(peripheral), \.rssiReads) { resume(waiter.continuation, rssi, error) }
        case .notifyState(let characteristic, let notifying, let error):
            let waiting = state.withLock { state in
                state.notifyPeripherals[Key(characteristic)] = nil
                return state.notifyStates.removeValue(forKey: Key(characteristic)) ?? []
            }
            for waiter in waiting { resume(waiter.continuation, (), error) }
            guard let error, !notifying else { return }
            let streams = state.withLock { $0.streams.removeValue(forKey: Key(characteristic)) ?? [:] }
            for stream in streams.values { stream.continuation.finish(throwing: error) }
        default:
            break
        }
    }

    /// A characteristic's value arrived (a read's result or a notification; `error` for a failed
    /// read): resumes the reads waiting for it and yields it to its streams. Every notification
    /// comes here, straight from `CentralManager.deliverNotification`: no lock when nobody waits
    /// for values at all, one lock and nothing copied when nobody waits for this characteristic's.
    func valueChanged(of characteristic: Characteristic, _ data: Data?, _ error: (any Error)?) {
        guard valuesAwaited.load(ordering: .acquiring) else { return }
        let key = Key(characteristic)
        let (reads, streams) = state.withLock { state -> ([Waiter<Data>], [Stream]) in
            if state.reads.isEmpty && state.streams.isEmpty {
                valuesAwaited.store(false, ordering: .releasing)
                return ([], [])
            }
            let reads = state.reads.isEmpty ? [] : (state.reads.removeValue(forKey: key) ?? [])
            let streams = state.streams.isEmpty ? [] : Array((state.streams[key] ?? [:]).values)
            return (reads, streams)
        }
        for waiter in reads { resume(waiter.continuation, data ?? Data(), error) }
        if let data, error == nil { for stream in streams { stream.continuation.yield(data) } }
    }

    /// The write with response `request` has its result.
    private func writeFinished(_ request: UInt64, _ error: (any Error)?) {
        let waiting = state.withLock { $0.writes.removeValue(forKey: request) }
        if let waiting { resume(waiting, (), error) }
    }

    /// The waits for a notification state of `peripheral`'s characteristics.
    private func takeNotifyStates(of peripheral: Key) -> [Waiter<Void>] {
        state.withLock { state in
            let characteristics = state.notifyPeripherals.filter { $0.value == peripheral }.keys
            var taken: [Waiter<Void>] = []
            for characteristic in characteristics {
                state.notifyPeripherals[characteristic] = nil
                taken += state.notifyStates.removeValue(forKey: characteristic) ?? []
            }
            return taken
        }
    }

    private func take<Value>(_ key: Key, _ table: WritableKeyPath<State, [Key: [Waiter<Value>]]>) -> [Waiter<Value>] {
        state.withLock { $0[keyPath: table].removeValue(forKey: key) ?? [] }
    }

    private func resume<Value: Sendable>(
        _ c: CheckedContinuation<Value, any Error>, _ value: Value, _ error: (any Error)?
    ) {
        if let error { c.resume(throwing: error) } else { c.resume(returning: value) }
    }

    private func endStreams(of peripheral: Key, _ error: any Error) {
        let ended = state.withLock { state -> [Stream] in
            var ended: [Stream] = []
            for (characteristic, streams) in state.streams {
                for (id, stream) in streams where stream.peripheral == peripheral {
                    ended.append(stream)
                    state.streams[characteristic]?[id] = nil
                }
            }
            return ended
        }
        for stream in ended { stream.continuation.finish(throwing: error) }
    }
}

extension AsyncWaiters {
    /// Waits for one event: `register` records the continuation under a new waiter ID, then
    /// `start` makes the request whose event resumes it. Cancelling the calling task removes the
    /// waiter (it throws `CancellationError`); the request itself goes on. In a task cancelled
    /// before the waiter was registered, the call throws `CancellationError` without a request.
    func wait<Value: Sendable>(
        _ register: (AsyncWaiters, UInt64, CheckedContinuation<Value, any Error>) -> Bool, then start: () -> Void
    ) async throws -> Value {
        let id = makeID()
        defer { endWait(id: id) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if register(self, id, continuation) { start() }
            }
        } onCancel: {
            self.cancel(id: id)
        }
    }
}
