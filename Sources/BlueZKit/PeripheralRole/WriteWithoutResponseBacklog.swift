import BlueZ
import Locking

/// Counts the writes without response on their way to a peripheral manager's delegate queue, so
/// that a central flooding them cannot grow the queue's backlog without bound.
///
/// bluetoothd acknowledged these writes already, so the central keeps sending while the app
/// falls behind. At most `limit` writes wait, holding at most `byteLimit` bytes of values;
/// later ones are dropped (the value is lost, the central is not told) and counted, and the
/// count is logged once the backlog has room again. Both bounds matter: a waiting write costs
/// its value plus about half a kilobyte (its request, its closure on the queue), so 1024 writes
/// of 510 bytes held about 1 MiB through the real bluetoothd (`Scripts/benchmark-flood --only
/// slow-write`), and the byte bound keeps long writes near half that. Used from the bus queue
/// (``admit(bytes:)``) and the delegate queue (``delivered(bytes:)``).
///
/// The invariant behind `Sendable`: state behind a `PosixMutex`.
final class WriteWithoutResponseBacklog: Sendable {
    /// How many may wait for the delegate queue.
    let limit: Int
    /// How many bytes of values they may hold together.
    let byteLimit: Int
    private let state = PosixMutex(State())

    private struct State {
        var waiting = 0
        var waitingBytes = 0
        var droppedSinceLog = 0
        var dropped = 0
    }

    init(limit: Int = 1024, byteLimit: Int = 256 * 1024) {
        self.limit = limit
        self.byteLimit = byteLimit
    }

    /// Takes one more write of a `bytes`-long value into the backlog; false (counted, and logged
    /// the first time in a burst) when it is full. A single value longer than `byteLimit` (an
    /// attribute value is at most 512 bytes) is admitted into an empty backlog.
    func admit(bytes: Int) -> Bool {
        let (admitted, firstDrop) = state.withLock { state -> (Bool, Bool) in
            guard state.waiting < limit, state.waiting == 0 || state.waitingBytes + bytes <= byteLimit else {
                state.droppedSinceLog += 1
                state.dropped += 1
                return (false, state.droppedSinceLog == 1)
            }
            state.waiting += 1
            state.waitingBytes += bytes
            return (true, false)
        }
        if firstDrop {
            BlueZLog.warning(
                "writes without response arrive faster than the delegate takes them: \(limit) writes or \(byteLimit) bytes wait, later ones are dropped"
            )
        }
        return admitted
    }

    /// One write of a `bytes`-long value reached the delegate queue; logs how many were dropped
    /// once there is room again.
    func delivered(bytes: Int) {
        let dropped = state.withLock { state -> Int in
            state.waiting -= 1
            state.waitingBytes -= bytes
            guard state.droppedSinceLog > 0, state.waiting < limit / 2, state.waitingBytes < byteLimit / 2 else {
                return 0
            }
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

    /// How many bytes of values wait for the delegate queue now.
    var waitingByteCount: Int { state.withLock { $0.waitingBytes } }
}
