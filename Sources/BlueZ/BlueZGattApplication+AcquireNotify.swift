import DBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

extension BlueZGattApplication {
    /// What a characteristic that offers `AcquireNotify` does with the sockets bluetoothd asks for:
    /// one per subscribing device on a bluetoothd with
    /// ``BlueZServerFeatures/perDeviceNotifySockets``. Each closure runs on the connection's queue.
    package struct NotifySockets: Sendable {
        /// A device subscribed: its link (already reading) is handed over.
        package var opened: @Sendable (BlueZNotifyLink) -> Void
        /// The device confirmed an indication sent through the link (bluetoothd ≥ 5.80).
        package var confirmed: @Sendable (BlueZNotifyLink) -> Void
        /// bluetoothd closed the link: the device unsubscribed, or its link or bluetoothd ended.
        package var closed: @Sendable (BlueZNotifyLink) -> Void

        package init(
            opened: @escaping @Sendable (BlueZNotifyLink) -> Void,
            confirmed: @escaping @Sendable (BlueZNotifyLink) -> Void,
            closed: @escaping @Sendable (BlueZNotifyLink) -> Void
        ) {
            self.opened = opened
            self.confirmed = confirmed
            self.closed = closed
        }
    }

    /// `AcquireNotify(options) -> (fd, mtu)`: bluetoothd (`acquire_notify_setup`) passes the
    /// subscribing device's `device` and `mtu`. We keep one end of a `SOCK_SEQPACKET` pair and
    /// hand out the other. Options without a device, or a failing `socketpair`, are answered with
    /// `org.bluez.Error.Failed`: bluetoothd then neither counts nor falls back (`acquire_notify_reply`).
    static func acquireNotifyMethod(_ sockets: NotifySockets, queue: DispatchQueue) -> DBusMethod {
        DBusMethod("AcquireNotify", in: "a{sv}", out: "hq") { invocation in
            guard let options = (try? invocation.arguments())?.first?.stringKeyedDictionary,
                let address = options["device"]?.objectPathValue.flatMap(BlueZGattRequest.address(of:))
            else {
                return invocation.reply(error: DBusError(name: "org.bluez.Error.Failed", message: "no device"))
            }
            let mtu = options["mtu"]?.uint16Value ?? 23
            let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            let (ours, theirs): (Int32, Int32)
            switch SystemCall.socketPair(AF_UNIX, type) {
            case .success(let pair): (ours, theirs) = pair
            case .failure(let error):
                return invocation.reply(error: DBusError(name: "org.bluez.Error.Failed", message: "\(error)"))
            }
            let link = BlueZNotifyLink(
                fd: ours, deviceAddress: address, mtu: mtu, queue: queue, onConfirm: sockets.confirmed,
                onClose: sockets.closed)
            sockets.opened(link)
            invocation.reply([.unixFD(UnixFileDescriptor(owning: theirs)), .uint16(mtu)])
        }
    }
}
