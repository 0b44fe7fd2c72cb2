import DBus
package import Dispatch

/// A socket bluetoothd handed over (`AcquireNotify`, `AcquireWrite`) with the MTU it reported:
/// an opaque handle for the layer above, which passes it to ``BlueZNotifySocket`` or
/// ``BlueZWriteSocket``. Released without use, it closes the descriptor.
package struct BlueZAcquiredSocket: Sendable {
    let descriptor: UnixFileDescriptor
    /// The ATT MTU bluetoothd reported with the socket.
    package let mtu: UInt16
}

extension BlueZNotifySocket {
    /// Takes over an acquired notify socket (see the main initializer).
    package convenience init(
        _ acquired: BlueZAcquiredSocket, queue: DispatchQueue,
        onValue: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, onClose: @escaping @Sendable () -> Void
    ) {
        self.init(descriptor: acquired.descriptor, mtu: acquired.mtu, queue: queue, onValue: onValue, onClose: onClose)
    }
}

extension BlueZWriteSocket {
    /// Takes over an acquired write socket (see the main initializer).
    package convenience init(
        _ acquired: BlueZAcquiredSocket, queue: DispatchQueue, onClose: @escaping @Sendable () -> Void
    ) {
        self.init(descriptor: acquired.descriptor, mtu: acquired.mtu, queue: queue, onClose: onClose)
    }
}
