import Locking

/// The open streams of one kind that a manager hands out (``CentralManager/states()``,
/// ``CentralManager/disconnections()``, ``PeripheralManager/subscriptions()``): each value sent
/// goes to every stream open at that moment, in the order sent; ``finish()`` (the manager's
/// release) ends them all, and a stream made after it ends at once.
///
/// Each stream keeps the newest `limit` values its consumer has not taken yet and drops older
/// ones, as ``CentralManager/discoveries()`` does. With a current value (``send(ifChanged:)``), a
/// new stream starts with it: it is yielded under the same lock that registers the stream, so
/// no value sent meanwhile is lost, none comes twice and none comes out of order. Values are
/// sent from one queue at a time (the manager's), so streams see them in one order.
///
/// The invariant behind `Sendable`: all state sits behind a `PosixMutex`.
final class StreamBroadcast<Element: Sendable>: Sendable {
    private struct State {
        var continuations: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var nextID: UInt64 = 0
        /// The value a new stream starts with (the last one sent with ``send(ifChanged:)``).
        var current: Element?
        /// The manager was released: no stream is added any more.
        var finished = false
    }

    private let state: PosixMutex<State>
    private let limit: Int

    /// - Parameters:
    ///   - limit: the values each stream keeps for a consumer that falls behind.
    ///   - current: the value a stream starts with until one is sent; nil for none.
    init(bufferingNewest limit: Int, current: Element? = nil) {
        self.limit = limit
        state = PosixMutex(State(current: current))
    }

    /// A new stream of the values sent from now on (after the current value, if there is one).
    func makeStream() -> AsyncStream<Element> {
        AsyncStream(bufferingPolicy: .bufferingNewest(limit)) { continuation in
            let id = state.withLock { state -> UInt64? in
                guard !state.finished else { return nil }
                if let current = state.current { continuation.yield(current) }
                state.nextID += 1
                state.continuations[state.nextID] = continuation
                return state.nextID
            }
            guard let id else { return continuation.finish() }
            continuation.onTermination = { [weak self] _ in
                self?.state.withLock { _ = $0.continuations.removeValue(forKey: id) }
            }
        }
    }

    /// Yields `value` to every open stream.
    func send(_ value: Element) {
        let streams = state.withLock { Array($0.continuations.values) }
        for stream in streams { stream.yield(value) }
    }

    /// Ends every stream, now and later: the manager is released.
    func finish() {
        let streams = state.withLock { state -> [AsyncStream<Element>.Continuation] in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        // Outside the lock: a stream's end runs its `onTermination`, which takes it.
        for stream in streams { stream.finish() }
    }
}

extension StreamBroadcast where Element: Equatable {
    /// Makes `value` the current value and yields it to every open stream, unless it is the
    /// current value already.
    func send(ifChanged value: Element) {
        let streams = state.withLock { state -> [AsyncStream<Element>.Continuation] in
            guard state.current != value else { return [] }
            state.current = value
            return Array(state.continuations.values)
        }
        for stream in streams { stream.yield(value) }
    }
}
