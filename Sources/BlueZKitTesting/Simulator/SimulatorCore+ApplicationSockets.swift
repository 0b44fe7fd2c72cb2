internal import DBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// `AcquireNotify` towards registered applications (`src/gatt-database.c`): when the first central
/// enables a characteristic that has `NotifyAcquired`, bluetoothd asks the application for a
/// socket (`acquire_notify_setup`: the `device`, `mtu` and `link` options) and sends every
/// datagram it reads there to all subscribed centrals (`sock_io_read`); later centrals only
/// count; the last one to leave closes it (`ccc_write_cb`), with no `StopNotify`.
///
/// As bluetoothd 5.82 (``SimulatedBlueZ/Version/bluez5_82``), each subscribing central gets a
/// socket of its own (`client_notify_io_get`), keyed by ``deviceSocketKey(_:address:)``: what is
/// read from it goes to that central only (`sock_io_read` → `send_notification_to_device`), a
/// confirmed indication writes `0x01` back (`sock_io_conf`), and the central unsubscribing or its
/// link ending closes it.
extension SimulatorCore {
    /// The key of the socket of the central at `address` for the characteristic `key` (5.82).
    static func deviceSocketKey(_ key: String, address: String) -> String { key + " " + address }

    /// `sock_io_conf` → `sock_io_write` (5.80): a confirmation is one byte `0x01` written back.
    func writeConfirmation(_ key: String) {
        run {
            guard let fd = applicationNotifyDescriptors[key] else { return }
            var byte: UInt8 = 1
            _ = withUnsafeBytes(of: &byte) { SystemCall.send(fd, $0, flags: Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        }
    }

    /// Registers what the central at `address` does with values read from the socket of `key`.
    func setApplicationNotifyHandler(_ key: String, address: String, _ handler: (@Sendable ([UInt8]) -> Void)?) {
        run { applicationNotifyHandlers[key, default: [:]][address] = handler }
    }

    /// Whether values of `key` come through an application's socket.
    func hasApplicationNotifySocket(_ key: String) -> Bool { run { applicationNotifySockets[key] != nil } }

    /// Starts reading the socket an application handed out for `key`; false when one is open already.
    func openApplicationNotifySocket(_ key: String, descriptor: UnixFileDescriptor) -> Bool {
        run {
            if heldNotifySocketCloses.remove(key) != nil { closeApplicationNotifySocket(key) }
            guard applicationNotifySockets[key] == nil else { return false }
            let fd = descriptor.take()
            let source = DescriptorReadiness.repeating(fd, .readable, queue: queue) { [weak self] in
                var buffer = [UInt8](repeating: 0, count: 512)
                // `sock_io_read`: one read of at most 512 bytes per datagram; nothing or an error ends it.
                while true {
                    let received = buffer.withUnsafeMutableBytes {
                        SystemCall.receive(fd, into: $0, flags: Int32(MSG_DONTWAIT))
                    }
                    if case .failure(let error) = received, error.isWouldBlock { return }
                    guard case .success(let count) = received, count > 0, let self else {
                        self?.closeApplicationNotifySocket(key)
                        return
                    }
                    let value = Array(buffer[..<count])
                    for handler in (self.applicationNotifyHandlers[key] ?? [:]).values { handler(value) }
                }
            } cancelled: {
                SystemCall.close(fd)
            }
            applicationNotifySockets[key] = source
            applicationNotifyDescriptors[key] = fd
            if stalledNotifyCentrals.contains(where: { key.hasSuffix(" " + $0) }) { source.setEnabled(false) }
            return true
        }
    }

    /// Closes the socket of `key` (the last central left, or the application closed its end).
    /// Returns whether there was one.
    @discardableResult
    func closeApplicationNotifySocket(_ key: String) -> Bool {
        run {
            guard let source = applicationNotifySockets.removeValue(forKey: key) else { return false }
            applicationNotifyDescriptors[key] = nil
            source.cancel()
            return true
        }
    }
}
