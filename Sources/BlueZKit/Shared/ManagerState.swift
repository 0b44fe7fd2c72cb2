/// The state of a central or peripheral manager, as Core Bluetooth's
/// `CBManagerState`.
///
/// The raw values are Core Bluetooth's. A manager starts in ``unknown`` and
/// reports every change through its delegate's `…DidUpdateState` method;
/// other calls are valid only in ``poweredOn``.
///
/// On Linux the state follows bluetoothd and the chosen adapter: bluetoothd
/// absent from the bus or restarting, or the system bus itself lost or not
/// reachable yet (the manager connects again by itself), gives ``resetting``, no adapter gives
/// ``unsupported``, the bus refusing access gives ``unauthorized``, and the
/// adapter's `Powered` property gives ``poweredOff`` or ``poweredOn``.
public enum ManagerState: Int, Hashable, Sendable, CaseIterable, Codable {
    /// The state is not known yet; an update follows (0).
    case unknown = 0
    /// The connection to the Bluetooth service was lost and is being
    /// re-established (1); on Linux, bluetoothd or the system bus is restarting.
    case resetting = 1
    /// This machine has no Bluetooth Low Energy adapter BlueZKit can use (2).
    case unsupported = 2
    /// This process may not use Bluetooth (3); on Linux, the system bus
    /// policy denies it access to bluetoothd.
    case unauthorized = 3
    /// The adapter is off (4).
    case poweredOff = 4
    /// The adapter is on and ready (5).
    case poweredOn = 5
}
