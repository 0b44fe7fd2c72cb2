internal import CDBus

/// How much we have sent that the bus has not taken yet: the basis of back-pressure
/// for callers that emit many signals (a peripheral notifying fast).
extension DBusConnection {
    /// What is waiting to leave: messages queued for the connection's queue, and
    /// bytes libdbus holds because the socket would block.
    package struct Backlog: Sendable, Hashable {
        /// Messages handed to `send` that have not reached libdbus yet.
        package var queuedMessages: Int
        /// Bytes in libdbus's outgoing queue (`dbus_connection_get_outgoing_size`).
        package var outgoingBytes: Int

        package init(queuedMessages: Int, outgoingBytes: Int) {
            self.queuedMessages = queuedMessages
            self.outgoingBytes = outgoingBytes
        }
    }

    /// The current backlog; any thread (libdbus locks the connection itself).
    package var backlog: Backlog {
        let queued = queuedSends.load(ordering: .relaxed)
        guard isOpen else { return Backlog(queuedMessages: queued, outgoingBytes: 0) }
        return Backlog(queuedMessages: queued, outgoingBytes: withRaw { Int(dbus_connection_get_outgoing_size($0)) })
    }
}
