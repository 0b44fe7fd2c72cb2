public import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a handler on a serial queue at a fixed rate, woken once a tick: a thread of its own
/// sleeps to an absolute schedule and runs the handler inside `queue.sync`.
///
/// Why not a `DispatchSourceTimer`: on Linux, libdispatch fires a timer on its manager thread
/// and hands the handler to a worker thread of the queue's pool, so each tick wakes two threads.
/// A sensor sending a value every 20 ms pays that on every value, and on a small machine a
/// thread wake-up costs about as much as building and sending the notification itself.
///
/// `queue.sync` from a thread that is not the queue's runs the handler on that thread when the
/// queue is idle, so the handler still runs "on" `queue`, serialized with everything else
/// there (a delegate's calls, for one), and needs no lock for state confined to the queue.
///
/// Ticks follow the schedule `start + n × interval`; after a late tick (the queue was busy, the
/// machine was suspended) the missed ones are skipped, not run in a burst, as a repeating
/// `DispatchSourceTimer` coalesces them.
public final class Metronome: Sendable {
    private let interval: Duration
    private let queue: DispatchQueue
    private let handler: @Sendable () -> Void
    /// ``State``'s raw value. An atomic, not `Synchronization.Mutex`: on Linux a contended
    /// `Mutex` is handed over where ThreadSanitizer cannot see it (its spin loop and the kernel),
    /// so `cancel()` beside the thread's check was reported as a race; atomics it follows.
    private let state = Atomic<UInt8>(State.idle.rawValue)

    private enum State: UInt8 { case idle, running, cancelled }

    /// A metronome calling `handler` on `queue` every `interval` (at least a microsecond) once
    /// ``start()`` was called.
    public init(interval: Duration, queue: DispatchQueue, handler: @escaping @Sendable () -> Void) {
        precondition(interval >= .microseconds(1), "a metronome's interval is at least a microsecond")
        self.interval = interval
        self.queue = queue
        self.handler = handler
    }

    /// Starts the ticks: the first comes one interval from now. Does nothing after the first call
    /// or after ``cancel()``.
    public func start() {
        let (started, _) = state.compareExchange(
            expected: State.idle.rawValue, desired: State.running.rawValue, ordering: .acquiringAndReleasing)
        guard started else { return }
        let thread = Thread { [self] in run() }
        thread.name = "metronome"
        thread.start()
    }

    /// Stops the ticks. Called on `queue`, no handler runs after it returns; called elsewhere,
    /// one that has begun may finish. The thread ends after its current sleep.
    public func cancel() {
        state.store(State.cancelled.rawValue, ordering: .releasing)
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool {
        state.load(ordering: .acquiring) == State.cancelled.rawValue
    }

    private func run() {
        let step = Self.nanoseconds(interval)
        var next = Self.now() + step
        while !isCancelled {
            var deadline = timespec(tv_sec: Int(next / 1_000_000_000), tv_nsec: Int(next % 1_000_000_000))
            while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil) == EINTR {}
            queue.sync {
                // Checked on the queue: a cancel() made there is never followed by a tick.
                if !isCancelled { handler() }
            }
            next = Self.deadline(after: next, step: step, now: Self.now())
        }
    }

    /// The tick after the one due at `due` (nanoseconds on the monotonic clock), `step` later;
    /// when that is not after `now`, the first point of the schedule that is (missed ticks are
    /// skipped).
    package static func deadline(after due: Int64, step: Int64, now: Int64) -> Int64 {
        let next = due + step
        guard next <= now else { return next }
        return now + step - (now - next) % step
    }

    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
