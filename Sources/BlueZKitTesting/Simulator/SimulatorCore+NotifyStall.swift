/// A stalled central's notify sockets (5.82): bluetoothd does not read them, so they fill up, and
/// sees them end only when the stall ends (``SimulatedCentral/stallNotifySockets()``).
extension SimulatorCore {
    /// Whether `key` names a socket of the central at `address` (``deviceSocketKey(_:address:)``).
    private static func isSocket(_ key: String, of address: String) -> Bool { key.hasSuffix(" " + address) }

    /// Stops reading the sockets of the central at `address`, now and as they open.
    func stallNotifySockets(address: String) {
        run {
            stalledNotifyCentrals.insert(address)
            for (key, source) in applicationNotifySockets where Self.isSocket(key, of: address) {
                source.setEnabled(false)
            }
        }
    }

    /// Reads the sockets of the central at `address` again, and closes those whose closing waited.
    func resumeNotifySockets(address: String) {
        run {
            guard stalledNotifyCentrals.remove(address) != nil else { return }
            for key in applicationNotifySockets.keys.sorted() where Self.isSocket(key, of: address) {
                if heldNotifySocketCloses.remove(key) != nil {
                    closeApplicationNotifySocket(key)
                } else {
                    applicationNotifySockets[key]?.setEnabled(true)
                }
            }
        }
    }

    /// Closes the socket `key` of the central at `address` as its subscription or link ends; while
    /// the central is stalled the closing waits for the stall to end. Returns whether there was one.
    @discardableResult
    func closeCentralNotifySocket(_ key: String, address: String) -> Bool {
        run {
            guard stalledNotifyCentrals.contains(address), applicationNotifySockets[key] != nil else {
                return closeApplicationNotifySocket(key)
            }
            heldNotifySocketCloses.insert(key)
            return true
        }
    }
}
