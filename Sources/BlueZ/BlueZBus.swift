import DBus
package import Dispatch

/// The bus bluetoothd is on, as the managers reach it: the system bus (or a chosen address),
/// connected again with back-off whenever it is lost, and tried again for as long as it cannot
/// be reached at start.
///
/// A lost bus looks to everything above like bluetoothd leaving and coming back (the connection
/// reports every watched name ownerless, then owned again), so the managers recover from a
/// `dbus-daemon` restart the way they recover from a bluetoothd restart.
package final class BlueZBus: Sendable {
    let connection: DBusConnection

    private init(_ connection: DBusConnection) { self.connection = connection }

    /// The serial queue the connection, and every client made on it, works on.
    package var queue: DispatchQueue { connection.queue }

    /// `queue` as a task executor: a task that prefers it runs its code on the queue between
    /// suspension points, so it may touch what only the queue touches.
    package var executor: any TaskExecutor { connection.executor }

    /// A task executor for `queue`, before a connection works on it (see ``executor``).
    package static func executor(for queue: DispatchQueue) -> any TaskExecutor {
        DBusQueueExecutor(queue: queue)
    }

    /// The waits between attempts: 100 ms doubling up to 15 s, then every 15 s.
    static let reconnectPolicy = DBusConnection.ReconnectPolicy.backOff

    /// Opens a reconnecting connection to `address` (nil: the system bus, honouring
    /// `DBUS_SYSTEM_BUS_ADDRESS`).
    ///
    /// While the bus cannot be reached, tells `failed` (the error and how many attempts failed
    /// before it) and tries again after the policy's wait, for as long as `isWanted` says so;
    /// nil once it no longer is. An address that can never work (malformed) is not tried again.
    /// With `queue`, the connection works on that serial queue (its owner's, made before the bus
    /// was reached).
    package static func connect(
        address: String?, label: String, queue: DispatchQueue? = nil, isWanted: @Sendable () -> Bool,
        failed: @Sendable (BlueZError, _ attempt: Int) -> Void
    ) async -> BlueZBus? {
        var attempt = 0
        let given = address ?? DBusConnection.systemBusAddress
        while isWanted() {
            do throws(DBusError) {
                // Once refused, without a GUID: the bus that comes up later has a new one.
                return BlueZBus(
                    try await DBusConnection.open(
                        address: attempt == 0 ? given : DBusConnection.addressForReconnecting(given), label: label,
                        reconnect: reconnectPolicy, queue: queue))
            } catch {
                failed(BlueZError(error), attempt)
                if error.code == .invalidArgs { return nil }
                DBusLog.warning("cannot reach the system bus (\(error.message)); trying again")
                try? await Task.sleep(for: reconnectPolicy.delays[min(attempt, reconnectPolicy.delays.count - 1)])
                attempt += 1
            }
        }
        return nil
    }
}
