internal import CDBus
import Dispatch
import Locking

extension DBusConnection {
    /// The default time a method call may take before it fails with `timeout`.
    package static let defaultCallTimeout: Duration = .seconds(25)

    /// One method call waiting for its reply. Queue-confined.
    final class PendingCall {
        var pending: OpaquePointer?
        /// The call's identity, kept alive while it is pending: `pendingCalls` is keyed by its
        /// `ObjectIdentifier`, which a freed `CallID` would hand to the next one.
        var id: CallID?
        var completion: ((Result<DBusMessage, DBusError>) -> Void)?
        var cancelled = false

        init(_ completion: @escaping (Result<DBusMessage, DBusError>) -> Void) {
            self.completion = completion
        }

        /// Resumes the caller once and releases the libdbus pending call.
        func finish(_ result: Result<DBusMessage, DBusError>, connection: DBusConnection) {
            if let pending {
                dbus_pending_call_cancel(pending)
                dbus_pending_call_unref(pending)
                self.pending = nil
            }
            let completion = self.completion
            self.completion = nil
            completion?(result)
        }
    }

    /// Sends a method call and waits for its reply, without blocking any thread.
    ///
    /// - Returns: the method return.
    /// - Throws: the peer's error reply as a `DBusError` (its name and message
    ///   kept); `timeout` after `timeout` (libdbus's timer); `noReply` when the
    ///   peer left the bus without answering; `disconnected` when this
    ///   connection closes; `cancelled` when the task is cancelled (the
    ///   pending call is cancelled in libdbus too).
    package func call(_ message: DBusMessage, timeout: Duration = defaultCallTimeout) async throws(DBusError)
        -> DBusMessage
    {
        let id = CallID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let start: @Sendable () -> Void = {
                    self.startCall(message, timeout: timeout, id: id) { result in
                        id.reply.withLock { $0 = result }
                        continuation.resume()
                    }
                }
                // A task on the connection's executor is on the queue already: send at once.
                if self.isOnQueue {
                    start()
                } else {
                    queue.async(execute: start)
                }
            }
        } onCancel: {
            queue.async { self.cancelCall(id) }
        }
        guard let result = id.reply.withLock({ $0.take() }) else {
            preconditionFailure("a call resumed without its reply")
        }
        return try result.get()
    }

    /// Sends a method call now, in the order of the calls made on the connection's queue, and
    /// hands its reply (or error, as for ``call(_:timeout:)``) to `completion` on that queue.
    ///
    /// For callers that must keep the order of their calls (GATT writes): tasks that each
    /// `await call(...)` may reach the bus in any order. Must be called on ``queue``.
    package func callInOrder(
        _ message: DBusMessage, timeout: Duration = defaultCallTimeout,
        completion: @escaping @Sendable (Result<DBusMessage, DBusError>) -> Void
    ) {
        dispatchPrecondition(condition: .onQueue(queue))
        startCall(message, timeout: timeout, id: CallID(), completion)
    }

    /// Convenience: a method call built and sent in one step; returns the reply's arguments.
    package func call(
        destination: BusName?, path: ObjectPath, interface: InterfaceName, member: MemberName,
        arguments: [DBusValue] = [], timeout: Duration = defaultCallTimeout
    ) async throws(DBusError) -> [DBusValue] {
        let message = try DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: member, arguments: arguments)
        return try await call(message, timeout: timeout).arguments()
    }

    /// Identifies one `call` between its start and its cancellation handler, and carries its
    /// reply back to the caller. `cancelled` is touched only on the connection's queue.
    final class CallID: @unchecked Sendable {
        var cancelled = false
        /// The reply, stored on the queue before the caller is resumed and taken by the caller.
        ///
        /// Not through the continuation, for ThreadSanitizer: when the reply comes before the
        /// caller has suspended, the runtime's `swift_continuation_await` sees it already resumed
        /// and goes on without telling TSan (its acquire is in the uninstrumented runtime), so TSan
        /// reported the message built on the reading thread and read by the caller as a race.
        /// A `PosixMutex`, whose lock and unlock TSan follows.
        let reply = PosixMutex<Result<DBusMessage, DBusError>?>(nil)
    }

    func startCall(
        _ message: DBusMessage, timeout: Duration, id: CallID,
        _ completion: @escaping (Result<DBusMessage, DBusError>) -> Void
    ) {
        let call = PendingCall(completion)
        if id.cancelled {
            return call.finish(.failure(DBusError(.cancelled, "the call was cancelled")), connection: self)
        }
        guard isOpen else {
            return call.finish(.failure(DBusError(.disconnected, "the connection is closed")), connection: self)
        }
        var pending: OpaquePointer? = nil
        // In Double: `seconds * 1000` overflows (and traps) for huge timeouts,
        // which become Int32.max, libdbus's "no timeout".
        let requested = (timeout / .milliseconds(1)).rounded(.up)
        let milliseconds = requested >= Double(Int32.max) ? Int32.max : Int32(max(1, requested))
        guard dbus_connection_send_with_reply(raw, message.raw, &pending, milliseconds) != 0, let pending else {
            let reason =
                dbus_connection_get_is_connected(raw) == 0
                ? DBusError(.disconnected, "the connection is closed")
                : DBusError(.invalidArgs, "this connection cannot pass Unix file descriptors")
            return call.finish(.failure(reason), connection: self)
        }
        call.pending = pending
        call.id = id
        let key = ObjectIdentifier(id)
        pendingCalls[key] = call
        let box = Unmanaged.passRetained(PendingCallContext(connection: self, key: key)).toOpaque()
        let installed = dbus_pending_call_set_notify(
            pending,
            { pending, data in
                guard let pending, let data else { return }
                let context = Unmanaged<PendingCallContext>.fromOpaque(data).takeUnretainedValue()
                context.connection?.completeCall(context.key, pending)
            },
            box,
            { data in
                guard let data else { return }
                Unmanaged<PendingCallContext>.fromOpaque(data).release()
            })
        if installed == 0 {
            Unmanaged<PendingCallContext>.fromOpaque(box).release()
            pendingCalls[key] = nil
            call.finish(.failure(DBusError(.noMemory, "cannot watch the pending call")), connection: self)
        } else if dbus_pending_call_get_completed(pending) != 0 {
            completeCall(key, pending)
        }
    }

    /// What the C notify callback needs to find the call again.
    final class PendingCallContext {
        weak var connection: DBusConnection?
        let key: ObjectIdentifier
        init(connection: DBusConnection, key: ObjectIdentifier) {
            self.connection = connection
            self.key = key
        }
    }

    private func completeCall(_ key: ObjectIdentifier, _ pending: OpaquePointer) {
        guard let call = pendingCalls.removeValue(forKey: key) else { return }
        guard let reply = dbus_pending_call_steal_reply(pending) else {
            return call.finish(.failure(DBusError(.noReply, "no reply")), connection: self)
        }
        let message = DBusMessage(owning: reply)
        if message.kind == .error, var error = message.error {
            if error.code == .noReply, message.sender == nil {
                // libdbus made this reply itself: its timer fired, or the connection went away.
                error =
                    isOpen && dbus_connection_get_is_connected(raw) != 0
                    ? DBusError(.timeout, "no reply within the timeout")
                    : DBusError(.disconnected, "the connection closed before the reply")
            }
            call.finish(.failure(error), connection: self)
        } else {
            call.finish(.success(message), connection: self)
        }
    }

    private func cancelCall(_ id: CallID) {
        id.cancelled = true
        if let call = pendingCalls.removeValue(forKey: ObjectIdentifier(id)) {
            call.finish(.failure(DBusError(.cancelled, "the call was cancelled")), connection: self)
        }
    }
}
