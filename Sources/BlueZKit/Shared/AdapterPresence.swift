import BlueZ

/// What a manager knows of bluetoothd and its adapter, and the ``ManagerState`` that follows: the
/// one reading of `BlueZClient.AdapterStatus` that both managers share.
///
/// `.resetting` needs history: bluetoothd missing is `.unsupported` until it (or an adapter) was
/// seen once, and `.resetting` afterwards, while it is expected back. Not thread-safe: the
/// central's engine keeps it on the bus queue, the peripheral manager under its lock.
struct AdapterPresence {
    /// Whether bluetoothd answered the last time the status changed.
    private(set) var bluetoothdPresent = false
    /// Whether bluetoothd or an adapter was ever seen (then a missing bluetoothd is `.resetting`).
    private(set) var everHadService = false
    /// The adapter's address as last reported (`""` before the first adapter).
    private(set) var adapterAddress = ""

    /// What a new status means for a manager.
    struct Change: Equatable {
        /// The state to report.
        var state: ManagerState
        /// bluetoothd has just appeared (at start or after a restart): it forgets agents when it
        /// restarts, so the pairing agent must be registered again.
        var bluetoothdAppeared: Bool
    }

    /// Takes a new status and returns what it changes.
    mutating func update(_ status: BlueZClient.AdapterStatus) -> Change {
        let present = status != .serviceAbsent && status != .accessDenied
        let appeared = present && !bluetoothdPresent
        bluetoothdPresent = present
        let state: ManagerState
        switch status {
        case .serviceAbsent:
            state = everHadService ? .resetting : .unsupported
        case .noAdapter:
            everHadService = true
            state = .unsupported
        case .accessDenied:
            state = .unauthorized
        case .present(let address, let powered):
            everHadService = true
            adapterAddress = address
            state = powered ? .poweredOn : .poweredOff
        }
        return Change(state: state, bluetoothdAppeared: appeared)
    }
}
