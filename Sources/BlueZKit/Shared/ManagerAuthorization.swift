import Synchronization

/// Whether this process may use Bluetooth, as Core Bluetooth's `CBManagerAuthorization`.
///
/// On Linux nobody is asked: the system bus's policy decides whether a process may talk to
/// bluetoothd (Debian's lets root and the `bluetooth` group in). A manager learns it when it
/// first reads bluetoothd's objects: refused (`AccessDenied`) is ``denied``, and the state is
/// ``ManagerState/unauthorized``; read is ``allowedAlways``. The raw values are Core Bluetooth's.
public enum ManagerAuthorization: Int, Hashable, Sendable, CaseIterable, Codable {
    /// Not known yet (0): no manager of this process has reached bluetoothd.
    case notDetermined = 0
    /// Never given on Linux (1); Core Bluetooth's parental or device-management restriction.
    case restricted = 1
    /// The system bus's policy refuses this process access to bluetoothd (2).
    case denied = 2
    /// This process may use bluetoothd (3).
    case allowedAlways = 3

    /// What a manager in `state` knows of its authorization; nil when that state tells nothing
    /// (``ManagerState/unknown``, ``ManagerState/resetting``, ``ManagerState/unsupported``:
    /// bluetoothd or the bus may be away).
    init?(_ state: ManagerState) {
        switch state {
        case .unauthorized: self = .denied
        case .poweredOn, .poweredOff: self = .allowedAlways
        case .unknown, .resetting, .unsupported: return nil
        }
    }
}

/// What Core Bluetooth's `CBManager`, the superclass of both managers, offers as a class:
/// ``authorization``. BlueZKit's managers have no common superclass; each has an
/// `authorization` of its own too (``CentralManager/authorization``).
public enum Manager {
    /// The last authorization a manager of this process learned (`CBManager.authorization`);
    /// ``ManagerAuthorization/notDetermined`` until one reached bluetoothd. Any thread.
    public static var authorization: ManagerAuthorization {
        ManagerAuthorization(rawValue: learned.load(ordering: .relaxed)) ?? .notDetermined
    }

    private static let learned = Atomic<Int>(ManagerAuthorization.notDetermined.rawValue)

    /// Records what a manager's new `state` tells of this process's authorization, and returns
    /// the manager's authorization in that state.
    @discardableResult
    static func learn(from state: ManagerState) -> ManagerAuthorization {
        guard let known = ManagerAuthorization(state) else { return authorization }
        learned.store(known.rawValue, ordering: .relaxed)
        return known
    }

    /// The authorization of a manager in `state`: what the state tells, else what this process
    /// learned last.
    static func authorization(in state: ManagerState) -> ManagerAuthorization {
        ManagerAuthorization(state) ?? authorization
    }
}
