internal import CDBus
import Dispatch
import Synchronization

extension DBusConnection {
    /// The default time a method call may take before it fails with `timeout`.
    package static let defaultCallTimeout: Duration = .seconds(25)

    /// One method call, from the moment it is made until its reply (or error) is handed over:
    /// what libdbus holds for it, its place among the connection's pending calls, and who waits.
    ///
    /// `@unchecked Sendable`: made by the caller and handed to the queue (by `queue.async` or
    /// on it already), every property is touched only on the connection's queue from then on —
    /// except `reply`, which is written on the queue and read by the caller only after `replied`
    /// says so. One object per call, with no lock: the round trip is the D-Bus layer's hottest
    /// path (`Scripts/benchmark-dbus --only roundtrip`).
    final class PendingCall: @unchecked Sendable {
        var pending: OpaquePointer?
        /// Its index in `pendingCalls` while libdbus holds it, -1 otherwise.
        var slot = -1
        var cancelled = false
        /// Who waits: a suspended `call` (resumed after `reply` is stored) or a completion
        /// (`callInOrder`, the calls the connection makes itself), run on the queue.
        var continuation: UnsafeContinuation<Void, Never>?
        var completion: ((Result<DBusMessage, DBusError>) -> Void)?
        /// The result for a suspended `call` (a reply it owns: one libdbus reference, no Swift
        /// object around it), written on the queue before `replied` is set.
        ///
        /// Not through the continuation, for ThreadSanitizer: when the reply comes before the
        /// caller has suspended, the runtime's `swift_continuation_await` sees it already resumed
        /// and goes on without telling TSan (its acquire is in the uninstrumented runtime), so TSan
        /// reported the message built on the reading thread and read by the caller as a race.
        var reply: Result<OpaquePointer, DBusError>?
        /// Stored (releasing) once `reply` is written; the caller loads it (acquiring) before it
        /// reads `reply`: an ordering TSan follows (the atomics are compiled into this module),
        /// at the cost of two plain loads and stores instead of a lock taken twice.
        let replied = Atomic<Bool>(false)
        /// For libdbus's notify function, which has only this object.
        ///
        /// `unowned(unsafe)`, not `weak`: libdbus calls the notify function only from inside a
        /// call this connection makes on its own libdbus connection (dispatching, sending,
        /// closing — in a method, so the object is alive, or in `deinit`, where it still is),
        /// and `tearDown` cancels every pending call before `deinit` lets go of libdbus. A weak
        /// reference cost a side-table load per reply; `Unmanaged`, used through
        /// `_withUnsafeGuaranteedRef`, costs no retain and release either (the slow path, as
        /// `DBusConnection` has a side table).
        var connection: Unmanaged<DBusConnection>?

        init(completion: ((Result<DBusMessage, DBusError>) -> Void)? = nil) {
            self.completion = completion
        }

        /// Resumes the caller once and releases the libdbus pending call (cancelling it first
        /// unless it `completed`: libdbus has let go of a completed one already). A reply is
        /// owned (one libdbus reference) and passes to whoever waits.
        func finish(_ result: Result<OpaquePointer, DBusError>, completed: Bool = false) {
            if let pending {
                if !completed { dbus_pending_call_cancel(pending) }
                dbus_pending_call_unref(pending)
                self.pending = nil
            }
            if let continuation {
                self.continuation = nil
                reply = result
                replied.store(true, ordering: .releasing)
                continuation.resume()
            } else if let completion {
                self.completion = nil
                completion(result.map { DBusMessage(owning: $0) })
            } else if case .success(let reply) = result {
                dbus_message_unref(reply)
            }
        }
    }

    /// Sends a method call and waits for its reply, suspended: no thread waits for the reply.
    ///
    /// Sending happens on the connection's queue: at once from a task on its executor; from
    /// another connection's queue, in a block queued there; from anywhere else, in a block the
    /// calling thread runs itself once the queue is free (`queue.sync`, briefly, as the queue's
    /// blocks never wait) — one thread hand-off fewer per call than queueing it.
    /// `nonisolated(nonsending)`: it runs on the caller's executor, so a task on the connection's
    /// executor stays on the queue and is resumed there, with no hop to the global executor and
    /// back.
    ///
    /// - Returns: the method return.
    /// - Throws: the peer's error reply as a `DBusError` (its name and message
    ///   kept); `timeout` after `timeout` (libdbus's timer); `noReply` when the
    ///   peer left the bus without answering; `disconnected` when this
    ///   connection closes; `cancelled` when the task is cancelled (the
    ///   pending call is cancelled in libdbus too).
    package nonisolated(nonsending) func call(_ message: DBusMessage, timeout: Duration = defaultCallTimeout)
        async throws(DBusError) -> DBusMessage
    {
        defer { withExtendedLifetime(message) {} }
        return DBusMessage(owning: try await call(raw: message.raw, timeout: timeout))
    }

    /// ``call(_:timeout:)`` for a libdbus message the caller keeps alive until this returns:
    /// gives the reply as one libdbus reference the caller owns. Inlined into both `call`s (one
    /// async frame fewer); the convenience `call` makes no Swift object for either message.
    @inline(__always)
    nonisolated(nonsending) func call(raw message: OpaquePointer, timeout: Duration)
        async throws(DBusError) -> OpaquePointer
    {
        let call = PendingCall()
        // Sent (libdbus keeps its own reference) before the caller can resume, in every branch:
        // even a cancelled call is finished only by `startCall` once it ran.
        nonisolated(unsafe) let message = message
        await withTaskCancellationHandler {
            // Unsafe, not checked: `finish` resumes once, and a checked one costs an allocation.
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                call.continuation = continuation
                let currentQueue = DispatchQueue.getSpecific(key: Self.queueKey)
                // A task on the connection's executor is on the queue already: send at once.
                if currentQueue == ObjectIdentifier(self) {
                    self.startCall(message, timeout: timeout, call)
                } else if currentQueue == nil {
                    // Send from this thread, as the reading thread reads (see `DBusReadWatchThread`):
                    // on an idle queue libdispatch runs the block here, with no thread to wake, and
                    // the queue's blocks never wait, so neither does this for long. Not from another
                    // connection's queue: two queues waiting for each other would deadlock.
                    queue.sync { self.startCall(message, timeout: timeout, call) }
                } else {
                    queue.async { self.startCall(message, timeout: timeout, call) }
                }
            }
        } onCancel: {
            queue.async { self.cancelCall(call) }
        }
        guard call.replied.load(ordering: .acquiring), let result = call.reply.take() else {
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
        startCall(message.raw, timeout: timeout, PendingCall(completion: completion))
    }

    /// Convenience: a method call built and sent in one step; returns the reply's arguments.
    ///
    /// Both messages stay libdbus messages (no `DBusMessage` object around either): the
    /// hottest use of the layer (`Scripts/benchmark-dbus --only roundtrip`).
    package nonisolated(nonsending) func call(
        destination: BusName?, path: ObjectPath, interface: InterfaceName, member: MemberName,
        arguments: [DBusValue] = [], timeout: Duration = defaultCallTimeout
    ) async throws(DBusError) -> [DBusValue] {
        let message = try DBusMessage.newMethodCall(
            destination: destination, path: path, interface: interface, member: member, arguments: arguments)
        defer { dbus_message_unref(message) }
        let reply = try await call(raw: message, timeout: timeout)
        defer { dbus_message_unref(reply) }
        return try DBusMessage.arguments(of: reply)
    }

    /// Sends `message` for `call`, which waits until its reply, error, timeout or cancellation.
    func startCall(_ message: OpaquePointer, timeout: Duration, _ call: PendingCall) {
        if call.cancelled {
            return call.finish(.failure(DBusError(.cancelled, "the call was cancelled")))
        }
        guard isOpen else {
            return call.finish(.failure(DBusError(.disconnected, "the connection is closed")))
        }
        var pending: OpaquePointer? = nil
        let milliseconds = Self.libdbusMilliseconds(timeout)
        guard dbus_connection_send_with_reply(raw, message, &pending, milliseconds) != 0, let pending else {
            let reason =
                dbus_connection_get_is_connected(raw) == 0
                ? DBusError(.disconnected, "the connection is closed")
                : DBusError(.invalidArgs, "this connection cannot pass Unix file descriptors")
            return call.finish(.failure(reason))
        }
        call.pending = pending
        call.connection = Unmanaged.passUnretained(self)
        call.slot = pendingCalls.count
        pendingCalls.append(call)
        let box = Unmanaged.passRetained(call).toOpaque()
        let installed = dbus_pending_call_set_notify(
            pending,
            { pending, data in
                guard let pending, let data else { return }
                Unmanaged<PendingCall>.fromOpaque(data)._withUnsafeGuaranteedRef { call in
                    call.connection?._withUnsafeGuaranteedRef { $0.completeCall(call, pending) }
                }
            },
            box,
            { data in
                guard let data else { return }
                Unmanaged<PendingCall>.fromOpaque(data).release()
            })
        if installed == 0 {
            Unmanaged<PendingCall>.fromOpaque(box).release()
            removePendingCall(call)
            call.finish(.failure(DBusError(.noMemory, "cannot watch the pending call")))
        } else if dbus_pending_call_get_completed(pending) != 0 {
            completeCall(call, pending)
        }
    }

    /// `timeout` in whole milliseconds, rounded up, for libdbus: at least 1, and `Int32.max`
    /// (libdbus's "no timeout") for anything as long or longer. In integers: a division of
    /// `Duration`s goes through `Double` (two conversions on every call).
    static func libdbusMilliseconds(_ timeout: Duration) -> Int32 {
        let (seconds, attoseconds) = timeout.components
        guard seconds >= 0 else { return 1 }
        let limit = Int64(Int32.max)
        guard seconds <= limit / 1000 else { return Int32.max }
        let perMillisecond: Int64 = 1_000_000_000_000_000
        let milliseconds = seconds * 1000 + (attoseconds + perMillisecond - 1) / perMillisecond
        return Int32(min(max(1, milliseconds), limit))
    }

    /// Takes `call` out of `pendingCalls` (the last one takes its place); false if it was not there.
    @discardableResult
    private func removePendingCall(_ call: PendingCall) -> Bool {
        let slot = call.slot
        guard slot >= 0 else { return false }
        let last = pendingCalls.removeLast()
        if last !== call {
            pendingCalls[slot] = last
            last.slot = slot
        }
        call.slot = -1
        return true
    }

    /// Fails every pending call with `reason` (the connection closed or was lost).
    func failPendingCalls(_ reason: DBusError) {
        let calls = pendingCalls
        pendingCalls.removeAll()
        for call in calls {
            call.slot = -1
            call.finish(.failure(reason))
        }
    }

    private func completeCall(_ call: PendingCall, _ pending: OpaquePointer) {
        guard removePendingCall(call) else { return }
        guard let reply = dbus_pending_call_steal_reply(pending) else {
            return call.finish(.failure(DBusError(.noReply, "no reply")), completed: true)
        }
        if var error = DBusMessage.error(of: reply) {
            if error.code == .noReply, dbus_message_get_sender(reply) == nil {
                // libdbus made this reply itself: its timer fired, or the connection went away.
                error =
                    isOpen && dbus_connection_get_is_connected(raw) != 0
                    ? DBusError(.timeout, "no reply within the timeout")
                    : DBusError(.disconnected, "the connection closed before the reply")
            }
            dbus_message_unref(reply)
            call.finish(.failure(error), completed: true)
        } else {
            call.finish(.success(reply), completed: true)
        }
    }

    private func cancelCall(_ call: PendingCall) {
        call.cancelled = true
        if removePendingCall(call) {
            call.finish(.failure(DBusError(.cancelled, "the call was cancelled")))
        }
    }
}
