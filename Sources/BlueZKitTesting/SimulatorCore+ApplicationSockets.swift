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
extension SimulatorCore {
    /// Registers what the central at `address` does with values read from the socket of `key`.
    func setApplicationNotifyHandler(_ key: String, address: String, _ handler: (@Sendable ([UInt8]) -> Void)?) {
        run { applicationNotifyHandlers[key, default: [:]][address] = handler }
    }

    /// Whether values of `key` come through an application's socket.
    func hasApplicationNotifySocket(_ key: String) -> Bool { run { applicationNotifySockets[key] != nil } }

    /// Starts reading the socket an application handed out for `key`; false when one is open already.
    func openApplicationNotifySocket(_ key: String, descriptor: UnixFileDescriptor) -> Bool {
        run {
            guard applicationNotifySockets[key] == nil else { return false }
            let fd = descriptor.take()
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [weak self] in
                var buffer = [UInt8](repeating: 0, count: 512)
                // `sock_io_read`: one read of at most 512 bytes per datagram; nothing or an error ends it.
                while true {
                    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 512, Int32(MSG_DONTWAIT)) }
                    if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
                    guard count > 0, let self else {
                        self?.closeApplicationNotifySocket(key)
                        return
                    }
                    let value = Array(buffer[..<count])
                    for handler in (self.applicationNotifyHandlers[key] ?? [:]).values { handler(value) }
                }
            }
            source.setCancelHandler { _ = Glibc.close(fd) }
            source.resume()
            applicationNotifySockets[key] = source
            return true
        }
    }

    /// Closes the socket of `key` (the last central left, or the application closed its end).
    /// Returns whether there was one.
    @discardableResult
    func closeApplicationNotifySocket(_ key: String) -> Bool {
        run {
            guard let source = applicationNotifySockets.removeValue(forKey: key) else { return false }
            source.cancel()
            return true
        }
    }
}
