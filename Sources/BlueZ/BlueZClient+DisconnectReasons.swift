import DBus

/// Why links ended: bluetoothd 5.84 and later send `Device1.Disconnected(reason, message)` as a
/// link ends, before `Connected` turns false (`device_disconnected` in `src/device.c`; the reason
/// is the kernel's, from the HCI reason code: 0x08 connection timeout is
/// `org.bluez.Reason.Timeout`, 0x13–0x15 are `org.bluez.Reason.Remote`). Older bluetoothd sends no
/// such signal, and no reason is known.
extension BlueZClient {
    /// The reason of a `Device1.Disconnected` signal.
    package enum DisconnectReason: Sendable, Hashable {
        /// `org.bluez.Reason.Timeout`: the link supervision timer ran out (HCI 0x08).
        case timeout
        /// `org.bluez.Reason.Local`: this host ended the link.
        case local
        /// `org.bluez.Reason.Remote`: the remote device ended the link.
        case remote
        /// `org.bluez.Reason.Authentication`: ended for an authentication failure.
        case authentication
        /// `org.bluez.Reason.Suspend`, `org.bluez.Reason.Unknown`, or a name this layer does not know.
        case other(String)

        /// The reason a signal's first argument names.
        package init(name: String) {
            switch name {
            case "org.bluez.Reason.Timeout": self = .timeout
            case "org.bluez.Reason.Local": self = .local
            case "org.bluez.Reason.Remote": self = .remote
            case "org.bluez.Reason.Authentication": self = .authentication
            default: self = .other(name)
            }
        }
    }

    /// Subscribes to `Device1.Disconnected` of every device.
    func followDisconnectReasons() async throws(DBusError) {
        let subscription = try await connection.subscribe(
            DBusMatchRule(
                sender: BlueZNames.service, pathNamespace: BlueZNames.root, interface: BlueZNames.device,
                member: "Disconnected")
        ) { [weak self] message in self?.disconnected(message) }
        disconnectedSubscription.withLock { $0 = subscription }
    }

    /// The reason bluetoothd gave for the end of `id`'s last link, if it gave one that nobody took
    /// yet; taking it forgets it (on the queue).
    package func takeDisconnectReason(of id: DeviceID) -> DisconnectReason? {
        disconnectReasons.removeValue(forKey: id)
    }

    /// The reason bluetoothd gave for the end of `id`'s last link, if nobody took it yet; it stays
    /// (on the queue).
    package func disconnectReason(of id: DeviceID) -> DisconnectReason? {
        disconnectReasons[id]
    }

    /// A `Disconnected` signal (on the queue): input from the bus, so a malformed one is ignored.
    private func disconnected(_ message: DBusMessage) {
        guard let path = message.path, let arguments = try? message.arguments(),
            let name = arguments.first?.stringValue
        else { return }
        let id = DeviceID(path: path)
        guard device(id)?.adapter == adapterPath else { return }
        disconnectReasons[id] = DisconnectReason(name: name)
    }
}
