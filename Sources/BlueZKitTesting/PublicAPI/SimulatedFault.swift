/// A misbehaviour the simulated bluetoothd shows for a method call, injected with ``SimulatedBlueZ/inject(_:for:count:path:)``.
public enum SimulatedFault: Sendable, Hashable {
    /// Answer with this D-Bus error instead of doing the work, such as
    /// `org.bluez.Error.Failed` "le-connection-abort-by-local".
    case error(name: String, message: String)
    /// Do the work this much later. For `Connect` and `Pair` the request is
    /// registered at once (so `Disconnect` or `CancelPairing` can cancel it) and
    /// completes after the delay. For `StartDiscovery` the caller's session is registered at
    /// once and the scan starts, and the call is answered, after the delay (a slow kernel
    /// start); until then that caller's `StopDiscovery` is answered with
    /// `org.bluez.Error.InProgress`, as bluetoothd's `stop_discovery` does.
    case delay(Duration)
    /// Never answer (the caller's own timeout fires, or it gets `NoReply` when bluetoothd restarts).
    case noReply
}
