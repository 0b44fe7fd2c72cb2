import BlueZ
import Dispatch
import Locking

/// Writes a manager's restoration state on its own queue, at most once per ``interval``.
///
/// Every change hands the whole new state to ``submit(_:)``; only the newest waiting one is
/// written. The first change after a quiet ``interval`` is written at once, later ones once the
/// interval since the last write has passed, so a central toggling a subscription 100 times a
/// second costs one file write a second, not 100 (each write syncs the file and the directory),
/// and never stalls the delegate queue. A state equal to the one written last is not written
/// again. ``flush()`` writes what waits at once; the manager's release calls it.
///
/// A process killed within ``interval`` of a change may leave the state from before that change.
///
/// The invariant behind `Sendable`: state behind a `PosixMutex`, writes on `queue`.
final class RestorationWriter<Record: RestorationRecord>: Sendable {
    /// The shortest time between two writes.
    let interval: Duration
    private let queue: DispatchQueue
    /// Writes one state; false when it failed (the next change then writes again).
    private let write: @Sendable (Record) -> Bool
    private let state: PosixMutex<State>

    private struct State: Sendable {
        var waiting: Record?
        var lastWritten: Record?
        var scheduled = false
        var lastWriteStart: ContinuousClock.Instant?
        var writes = 0
    }

    /// A writer whose first write is skipped when it equals `lastWritten` (what the file holds).
    init(
        lastWritten: Record?, interval: Duration = .seconds(1), label: String,
        write: @escaping @Sendable (Record) -> Bool
    ) {
        self.interval = interval
        self.queue = DispatchQueue(label: label, qos: .utility)
        self.write = write
        var initial = State()
        initial.lastWritten = lastWritten
        self.state = PosixMutex(initial)
    }

    /// Takes `record` as the state to write next (replacing one that waits); any thread.
    func submit(_ record: Record) {
        let delay: Duration? = state.withLock { state in
            guard record != state.lastWritten else {
                // Back to what the file holds: nothing to write.
                state.waiting = nil
                return nil
            }
            state.waiting = record
            guard !state.scheduled else { return nil }
            state.scheduled = true
            guard let last = state.lastWriteStart else { return .zero }
            return max(.zero, interval - (ContinuousClock.now - last))
        }
        guard let delay else { return }
        queue.asyncAfter(deadline: .now() + delay.dispatchInterval) { [weak self] in self?.writeWaiting() }
    }

    /// Writes the waiting state now, if any, and returns once it is written (not on the writer's
    /// own queue).
    func flush() {
        queue.sync { writeWaiting() }
    }

    /// How many writes were made (failed ones included).
    var writeCount: Int { state.withLock { $0.writes } }

    /// On `queue`.
    private func writeWaiting() {
        let record: Record? = state.withLock { state in
            state.scheduled = false
            guard let record = state.waiting else { return nil }
            state.waiting = nil
            state.lastWritten = record
            // The start of this write: a change made while it runs waits a full interval.
            state.lastWriteStart = .now
            state.writes += 1
            return record
        }
        guard let record, !write(record) else { return }
        state.withLock { state in
            if state.lastWritten == record { state.lastWritten = nil }
        }
    }
}
