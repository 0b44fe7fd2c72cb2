import DBus

/// Why a simulated link ended, and what bluetoothd 5.83 and later say about it: the
/// `Device1.Disconnected(reason, message)` signal that `device_disconnected` (`src/device.c`)
/// sends before `Connected` turns false. The names and sentences are bluetoothd's; the reason
/// is the kernel's management reason, which it derives from the HCI code (`hci_to_mgmt_reason`).
extension SimulatorCore {
    enum LinkEnd: Sendable {
        /// The peripheral (or central) ended the link: HCI 0x13–0x15.
        case remote
        /// The supervision timer ran out (out of range): HCI 0x08.
        case timeout
        /// This host ended it: a `Disconnect` (`disconnect_complete`), a failed pairing's
        /// disconnection by the kernel, a blocked device.
        case local
        /// The adapter went down (`adapter_stop` removes every connection as unknown).
        case unknown
        /// A name and sentence a test chose (``SimulatedPeripheral/dropConnection(reason:message:)``).
        case named(String, String)

        /// The signal's arguments, as bluetoothd sends them.
        var arguments: (name: String, message: String) {
            switch self {
            case .remote: ("org.bluez.Reason.Remote", "Connection terminated by remote user")
            case .timeout: ("org.bluez.Reason.Timeout", "Connection timeout")
            case .local: ("org.bluez.Reason.Local", "Connection terminated by local host")
            case .unknown: ("org.bluez.Reason.Unknown", "Unspecified")
            case .named(let name, let message): (name, message)
            }
        }
    }

    /// Sends `Device1.Disconnected` for the link of `path` that ends for `end`, when the simulated
    /// release does (5.87; none before 5.83). Emitted at once, so it precedes the batched
    /// `Connected` change, as in bluetoothd.
    func announceLinkEnd(_ path: ObjectPath, _ end: LinkEnd) {
        guard options.version >= .bluez5_87 else { return }
        let (name, message) = end.arguments
        emitSignal(path, "org.bluez.Device1", "Disconnected", [.string(name), .string(message)])
    }
}
