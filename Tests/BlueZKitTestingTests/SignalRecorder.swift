import DBus
import Locking
import TestSupport
import Testing

/// Every signal a client received, with waiting for the next one that matches.
final class SignalRecorder: Sendable {
    private struct Waiter {
        let id: Int
        let from: Int
        let predicate: @Sendable (Signal) -> Bool
        /// Resumed with the matching signal's index in `State.signals`, or nil on timeout.
        let continuation: CheckedContinuation<Int?, Never>
    }

    private struct State {
        var signals: [Signal] = []
        var waiters: [Waiter] = []
        var nextID = 0
    }

    /// Contended (signals arrive while the test waits): a `PosixMutex`, which ThreadSanitizer follows.
    private let state = PosixMutex(State())

    func append(_ message: DBusMessage) {
        let signal = Signal(message)
        let (index, ready) = state.withLock { state -> (Int, [Waiter]) in
            state.signals.append(signal)
            let index = state.signals.count - 1
            let ready = state.waiters.filter { index >= $0.from && $0.predicate(signal) }
            state.waiters.removeAll { waiter in ready.contains { $0.id == waiter.id } }
            return (index, ready)
        }
        for waiter in ready { waiter.continuation.resume(returning: index) }
    }

    /// Everything received so far.
    var all: [Signal] { state.withLock { $0.signals } }
    /// The number received so far: a mark to look at later signals only.
    var count: Int { state.withLock { $0.signals.count } }

    func since(_ mark: Int) -> [Signal] { state.withLock { Array($0.signals.dropFirst(mark)) } }

    /// The first signal at or after `mark` that matches, waiting up to `timeout` (times
    /// `TestTime.scale`) for it; nil on timeout.
    func first(
        from mark: Int = 0, timeout: Duration = .seconds(5), where predicate: @escaping @Sendable (Signal) -> Bool
    ) async -> Signal? {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timer = Task {
            try? await Task.sleep(for: TestTime.scaled(timeout))
            self.cancelWaiter(id)
        }
        defer { timer.cancel() }
        let index = await withCheckedContinuation { continuation in
            let found = state.withLock { state -> Int? in
                if let match = state.signals.indices.dropFirst(mark).first(where: { predicate(state.signals[$0]) }) {
                    return match
                }
                state.waiters.append(Waiter(id: id, from: mark, predicate: predicate, continuation: continuation))
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
        // The signal itself is taken under the lock, not from the continuation: when the
        // resume comes before the task suspends, Swift's runtime returns without telling
        // ThreadSanitizer, which then reports the signal's values (built on the bus's
        // thread) as a race. The lock is the happens-before it can see.
        guard let index else { return nil }
        return state.withLock { $0.signals[index] }
    }

    /// Like `first`, but records an issue when nothing matches in time.
    func expect(
        from mark: Int = 0, _ what: String, timeout: Duration = .seconds(5),
        sourceLocation: SourceLocation = #_sourceLocation, where predicate: @escaping @Sendable (Signal) -> Bool
    ) async -> Signal? {
        let signal = await first(from: mark, timeout: timeout, where: predicate)
        if signal == nil { Issue.record("no signal: \(what)", sourceLocation: sourceLocation) }
        return signal
    }

    private func cancelWaiter(_ id: Int) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(returning: nil)
    }
}
