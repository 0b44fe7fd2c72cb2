import Locking

/// What an async sequence yielded so far, read by a task of its own, and how it ended: a test
/// waits on these with ``waitUntil(_:timeout:sourceLocation:_:)``, so every wait is bounded.
public final class Collected<Element: Sendable>: Sendable {
    private struct State {
        var values: [Element] = []
        var finished = false
        var error: (any Error)?
    }

    private let state = PosixMutex(State())
    private let reader = PosixMutex<Task<Void, Never>?>(nil)

    /// Starts reading `sequence`.
    public init<Sequence: AsyncSequence & Sendable>(_ sequence: Sequence) where Sequence.Element == Element {
        let task = Task { [state] in
            do {
                for try await value in sequence { state.withLock { $0.values.append(value) } }
            } catch {
                state.withLock { $0.error = error }
            }
            state.withLock { $0.finished = true }
        }
        reader.withLock { $0 = task }
    }

    /// The values so far, in order.
    public var values: [Element] { state.withLock { $0.values } }
    /// Whether the sequence ended (finished or threw).
    public var isFinished: Bool { state.withLock { $0.finished } }
    /// The error the sequence threw, if it did.
    public var error: (any Error)? { state.withLock { $0.error } }
    /// Stops reading: the sequence's consumer goes away (its task is cancelled).
    public func cancel() { reader.withLock { $0 }?.cancel() }
}
