/// The back-off between loads of bluetoothd's tree that failed or overflowed in a row.
extension BlueZObjectCache {
    /// Runs its action once after the given wait, on any thread.
    package typealias RestartTimer = @Sendable (Duration, @escaping @Sendable () -> Void) -> Void

    /// The wait before the `restarts`-th restart in a row: 100 ms, doubling up to 5 s.
    package static func restartDelay(afterRestarts restarts: Int) -> Duration {
        min(.milliseconds(100 << min(max(restarts - 1, 0), 6)), .seconds(5))
    }

    /// The clock's timer: a task that sleeps.
    static let sleepingTimer: RestartTimer = { delay, action in
        Task {
            try? await Task.sleep(for: delay)
            action()
        }
    }
}
