internal import CDBus
import Dispatch
import Synchronization

extension DBusConnection {
    /// The default time a method call may take before it fails with `timeout`.
    package static let defaultCallTimeout: Duration = .seconds(25)

    /// One method call, from the moment it is made until its reply (or error) is handed over:
    /// its serial and deadline, its place among the connection's pending calls, and who waits.
    ///
    /// `@unchecked Sendable`: made by the caller and handed to the queue (by `queue.async` or
    /// on it already), every property is touched only on the connection's queue from then on —
    /// except `reply`, which is written on the queue and read by the caller only after `replied`
    /// says so. One object per call, with no lock: the round trip is the D-Bus layer's hottest
    /// path (`Scripts/benchmark-dbus --only roundtrip`).
    final class PendingCall: @unchecked Sendable {
        /// The serial libdbus gave the call when it was sent: its reply carries it.
        var serial: UInt32 = 0
        /// When it times out (`DispatchTime.uptimeNanoseconds`; `UInt64.max`: never).
        var deadline = UInt64.max
        /// Its index in `pendingCalls` (and `pendingSerials`) while it waits, -1 otherwise.
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

        init(completion: ((Result<DBusMessage, DBusError>) -> Void)? = nil) {
            self.completion = completion
        }

        /// Resumes the caller once. A reply is owned (one libdbus reference) and passes to
        /// whoever waits.
        func finish(_ result: Result<OpaquePointer, DBusError>) {
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
    ///   kept); `timeout` after `timeout` (the connection's timer); `noReply` when the
    ///   peer left the bus without answering (the bus says so); `disconnected` when this
    ///   connection closes or is lost; `cancelled` when the task is cancelled (a reply
    ///   that comes later is dropped).
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
                    // Send from this thread, as the reading thread reads (a dedicated `DescriptorReadiness`):
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
    ///
    /// Not with libdbus's pending calls (`dbus_connection_send_with_reply`): for each, libdbus
    /// builds in advance the error it would give on a timeout (a whole message, about a quarter
    /// of a round trip's instructions), a pending-call object, a hash-table entry and a timeout,
    /// and takes its lock again to set the notify function, check completion and steal the
    /// reply. Here the call is sent as any message; its serial and deadline are kept in
    /// `pendingCalls`; the reply is taken by serial in the connection's filter
    /// (``takeReply(_:)``) and the deadline watched by the connection's one timer.
    func startCall(_ message: OpaquePointer, timeout: Duration, _ call: PendingCall) {
        if call.cancelled {
            return call.finish(.failure(DBusError(.cancelled, "the call was cancelled")))
        }
        // libdbus queues a message for a connection that has gone (and never sends it): a call
        // made before its loss reached the queue fails at once, as `connectionLost` will fail
        // those already waiting.
        guard isOpen, dbus_connection_get_is_connected(raw) != 0 else {
            return call.finish(.failure(DBusError(.disconnected, "the connection is closed")))
        }
        var serial: UInt32 = 0
        guard dbus_connection_send(raw, message, &serial) != 0 else {
            let reason =
                dbus_message_contains_unix_fds(message) != 0
                ? DBusError(.invalidArgs, "this connection cannot pass Unix file descriptors")
                : DBusError(.noMemory, "cannot queue the call")
            return call.finish(.failure(reason))
        }
        call.serial = serial
        call.deadline = Self.callDeadline(after: timeout, now: DispatchTime.now().uptimeNanoseconds)
        call.slot = pendingCalls.count
        pendingCalls.append(call)
        pendingSerials.append(serial)
        if call.deadline < timeouts.armedDeadline { armTimeoutTimer(at: call.deadline) }
    }

    /// When a call made at `now` (uptime nanoseconds) with `timeout` times out: at least a
    /// millisecond on (as libdbus took whole milliseconds, at least one); `UInt64.max`, never,
    /// for a timeout that reaches past the clock's range (`Duration` holds far more).
    static func callDeadline(after timeout: Duration, now: UInt64) -> UInt64 {
        let (seconds, attoseconds) = timeout.components
        let millisecond: UInt64 = 1_000_000
        guard seconds > 0 || (seconds == 0 && attoseconds >= 1_000_000_000_000_000) else { return now &+ millisecond }
        let limit = (UInt64.max - now) / 1_000_000_000
        guard UInt64(seconds) < limit else { return .max }
        return now + UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    /// The filter's part for replies: completes the waiting call `reply` answers (by its reply
    /// serial) and says whether there was one. On the queue, inside dispatch; `reply` is
    /// libdbus's (borrowed: a reference is taken for whoever waits).
    func takeReply(_ reply: OpaquePointer) -> Bool {
        let serial = dbus_message_get_reply_serial(reply)
        guard let slot = pendingSerials.firstIndex(of: serial) else { return false }
        let call = pendingCalls[slot]
        removePendingCall(call)
        if let error = DBusMessage.error(of: reply) {
            call.finish(.failure(error))
        } else {
            call.finish(.success(dbus_message_ref(reply)))
        }
        return true
    }

    /// Fails with `timeout` every call whose deadline has passed at `now`; the earliest deadline
    /// of those left (`UInt64.max`: none). On the queue, when the timer fires.
    func expireCalls(now: UInt64) -> UInt64 {
        var due: [PendingCall] = []
        var next = UInt64.max
        for call in pendingCalls {
            if call.deadline <= now { due.append(call) } else { next = min(next, call.deadline) }
        }
        for call in due {
            removePendingCall(call)
            call.finish(.failure(DBusError(.timeout, "no reply within the timeout")))
        }
        // A completion run above may have made calls: their deadlines armed the timer already.
        return next
    }

    /// Takes `call` out of `pendingCalls` (the last one takes its place); false if it was not there.
    @discardableResult
    private func removePendingCall(_ call: PendingCall) -> Bool {
        let slot = call.slot
        guard slot >= 0 else { return false }
        let last = pendingCalls.removeLast()
        let lastSerial = pendingSerials.removeLast()
        if last !== call {
            pendingCalls[slot] = last
            pendingSerials[slot] = lastSerial
            last.slot = slot
        }
        call.slot = -1
        return true
    }

    /// Fails every pending call with `reason` (the connection closed or was lost).
    func failPendingCalls(_ reason: DBusError) {
        let calls = pendingCalls
        pendingCalls.removeAll()
        pendingSerials.removeAll()
        for call in calls {
            call.slot = -1
            call.finish(.failure(reason))
        }
    }

    private func cancelCall(_ call: PendingCall) {
        call.cancelled = true
        if removePendingCall(call) {
            call.finish(.failure(DBusError(.cancelled, "the call was cancelled")))
        }
    }
}
