import BlueZ
import Locking

/// Counts the writes without response on their way to a peripheral manager's delegate queue, so
/// that a central flooding them cannot grow the queue's backlog without bound.
///
/// bluetoothd acknowledged these writes already, so the central keeps sending while the app
/// falls behind. At most `limit` wait; later ones are dropped (the value is lost, the central is
/// not told) and counted, and the count is logged once the backlog has room again. Used from
/// the bus queue (``admit()``) and the delegate queue (``delivered()``).
///
/// The invariant behind `Sendable`: state behind a `PosixMutex`.
final class WriteWithoutResponseBacklog: Sendable {
    /// How many may wait for the delegate queue.
    let limit: Int
    private let state = PosixMutex(State())

    private struct State {
        var waiting = 0
        var droppedSinceLog = 0
        var dropped = 0
    }

    init(limit: Int = 1024) { self.limit = limit }

    /// Takes one more write into the backlog; false (counted, and logged the first time in a
    /// burst) when it is full.
    func admit() -> Bool {
        let (admitted, firstDrop) = state.withLock { state -> (Bool, Bool) in
            guard state.waiting < limit else {
                state.droppedSinceLog += 1
                state.dropped += 1
                return (false, state.droppedSinceLog == 1)
            }
            state.waiting += 1
            return (true, false)
        }
        if firstDrop {
            BlueZLog.warning(
                "writes without response arrive faster than the delegate takes them: \(limit) wait, later ones are dropped"
            )
        }
        return admitted
    }

    /// One write reached the delegate queue; logs how many were dropped once there is room again.
    func delivered() {
        let dropped = state.withLock { state -> Int in
            state.waiting -= 1
            guard state.droppedSinceLog > 0, state.waiting < limit / 2 else { return 0 }
            defer { state.droppedSinceLog = 0 }
            return state.droppedSinceLog
        }
        if dropped > 0 {
            BlueZLog.warning("\(dropped) writes without response were dropped (the delegate fell behind)")
        }
    }

    /// How many writes were dropped since the manager started.
    var droppedCount: Int { state.withLock { $0.dropped } }

    /// How many wait for the delegate queue now.
    var waitingCount: Int { state.withLock { $0.waiting } }
}
