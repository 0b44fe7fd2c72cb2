import DBus

/// Why links ended: bluetoothd 5.83 and later send `Device1.Disconnected(reason, message)` as a
/// link ends, before `Connected` turns false (`device_disconnected` in `src/device.c`, added by
/// 53db78000, first tagged in 5.83). What it names is not the HCI reason code but the kernel's
/// management reason (`MGMT_DEV_DISCONN_*` of the Device Disconnected event), which the kernel
/// derives from the HCI code (`hci_to_mgmt_reason` in `net/bluetooth/hci_event.c`): 0x08 is
/// timeout, 0x13–0x15 remote, 0x16 local, every other code unknown; a link whose authentication
/// or encryption failed with 0x06 (PIN or key missing) is authentication, and any link ended while
/// the host suspends is suspend (`mgmt_device_disconnected`). bluetoothd itself says local when
/// the link ended by its own `Disconnect` (`disconnect_complete`) and unknown when the adapter
/// goes down. The HCI code is not sent on the bus. The message is a fixed sentence per reason.
/// Older bluetoothd sends no such signal, and no reason is known.
extension BlueZClient {
    /// The reason of a `Device1.Disconnected` signal.
    package enum DisconnectReason: Sendable, Hashable {
        /// `org.bluez.Reason.Timeout`: the link supervision timer ran out (HCI 0x08).
        case timeout
        /// `org.bluez.Reason.Local`: this host ended the link (HCI 0x16, or bluetoothd's own `Disconnect`).
        case local
        /// `org.bluez.Reason.Remote`: the remote device ended the link (HCI 0x13, 0x14, 0x15).
        case remote
        /// `org.bluez.Reason.Authentication`: ended for an authentication failure (key missing).
        case authentication
        /// `org.bluez.Reason.Suspend`: this host ended the link as it suspended.
        case suspend
        /// `org.bluez.Reason.Unknown`: any other HCI code, or the adapter went down.
        case unknown
        /// A name this layer does not know (a later bluetoothd's).
        case other(String)

        /// The reason a signal's first argument names.
        package init(name: String) {
            switch name {
            case "org.bluez.Reason.Timeout": self = .timeout
            case "org.bluez.Reason.Local": self = .local
            case "org.bluez.Reason.Remote": self = .remote
            case "org.bluez.Reason.Authentication": self = .authentication
            case "org.bluez.Reason.Suspend": self = .suspend
            case "org.bluez.Reason.Unknown": self = .unknown
            default: self = .other(name)
            }
        }
    }

    /// One `Device1.Disconnected` signal: its reason and bluetoothd's sentence for it.
    package struct Disconnection: Sendable, Hashable {
        /// The reason the first argument names.
        package let reason: DisconnectReason
        /// The second argument, as bluetoothd sent it (such as "Connection timeout"), bounded.
        package let message: String
    }

    /// The longest message kept from a signal: bluetoothd's are under 60 characters.
    static let longestDisconnectMessage = 200

    /// Subscribes to `Device1.Disconnected` of every device.
    func followDisconnectReasons() async throws(DBusError) {
        let subscription = try await connection.subscribe(
            DBusMatchRule(
                sender: BlueZNames.service, pathNamespace: BlueZNames.root, interface: BlueZNames.device,
                member: "Disconnected")
        ) { [weak self] message in self?.disconnected(message) }
        disconnectedSubscription.withLock { $0 = subscription }
    }

    /// The signal bluetoothd sent for the end of `id`'s last link, if it sent one that nobody took
    /// yet; taking it forgets it (on the queue).
    package func takeDisconnection(of id: DeviceID) -> Disconnection? {
        disconnectReasons.removeValue(forKey: id)
    }

    /// The reason bluetoothd gave for the end of `id`'s last link, if nobody took it yet; it stays
    /// (on the queue).
    package func disconnectReason(of id: DeviceID) -> DisconnectReason? {
        disconnectReasons[id]?.reason
    }

    /// A `Disconnected` signal (on the queue): input from the bus, so a malformed one is ignored
    /// and a long message cut.
    private func disconnected(_ message: DBusMessage) {
        guard let path = message.path, let arguments = try? message.arguments(),
            let name = arguments.first?.stringValue
        else { return }
        let id = DeviceID(path: path)
        guard device(id)?.adapter == adapterPath else { return }
        let text = arguments.dropFirst().first?.stringValue ?? ""
        disconnectReasons[id] = Disconnection(
            reason: DisconnectReason(name: name), message: String(text.prefix(Self.longestDisconnectMessage)))
    }
}
