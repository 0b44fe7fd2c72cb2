internal import CDBus
package import Dispatch
import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A private connection to a D-Bus bus (or peer), with its own serial queue as main loop.
///
/// Threading: every libdbus call on the connection happens on `queue`;
/// methods may be called from any thread and hop onto it. The queue is never
/// blocked waiting for a reply: calls are asynchronous, so while one of our
/// calls is pending, calls to our exported objects are served. Signal
/// handlers and method handlers run on `queue`; they must not block.
///
/// All mutable state below is touched only on `queue` — the invariant behind
/// `@unchecked Sendable` (checked with `dispatchPrecondition` in debug builds).
///
/// A connection opened with a ``ReconnectPolicy`` outlives its bus: when the bus goes away it
/// connects again with back-off and carries its exported objects, signal subscriptions,
/// watched names and owned names over (see `DBusConnection+Reconnect.swift`).
package final class DBusConnection: @unchecked Sendable {
    /// The serial queue that runs this connection's main loop and handlers.
    package let queue: DispatchQueue
    /// `queue` as an executor, for tasks that work on the connection's queue.
    package let executor: DBusQueueExecutor
    /// The libdbus connection; queue-confined. A reconnecting connection replaces it on the
    /// queue; off the queue use ``withRaw(_:)``.
    var raw: OpaquePointer
    /// `raw` for readers off the queue, swapped under this lock so that none uses a freed one.
    let sharedRaw: PosixMutex<RawPointer>
    /// Where to connect again and when; nil when losing the connection is final.
    let reconnection: (address: String, policy: ReconnectPolicy)?
    /// Whether the connection is to a message bus (sent `Hello`).
    package let isBus: Bool

    private let uniqueNameStorage = PosixMutex<BusName?>(nil)
    let openStorage = Atomic<Bool>(true)
    /// A drain is queued and has not started (see `scheduleDrain`); any thread.
    let drainRequested = Atomic<Bool>(false)
    /// Messages handed to `send` that have not reached libdbus yet; any thread.
    let queuedSends = Atomic<Int>(0)

    // Queue-confined state. The queue is what keeps accesses exclusive, so the ones touched
    // on every method call skip Swift's run-time exclusivity check (`@exclusivity(unchecked)`:
    // a begin/end pair per access, about a hundred instructions a call in all).
    var watches: [UnsafeMutableRawPointer: WatchSources] = [:]
    @exclusivity(unchecked) var timeouts = TimeoutTable()
    var drainScheduled = false
    /// The calls waiting for their reply, each knowing its index (`PendingCall.slot`), and their
    /// serials at the same indices (the reply's lookup scans these).
    @exclusivity(unchecked) var pendingCalls: [PendingCall] = []
    @exclusivity(unchecked) var pendingSerials: [UInt32] = []
    var router = SignalRouter()
    var objects = ObjectTree()
    var nameOwners: [BusName: TrackedName] = [:]
    var ownerWatches: [BusName: DBusSubscription] = [:]
    var disconnectHandlers: [@Sendable () -> Void] = []
    var lifecycle = Lifecycle.open
    var lifecycleHandlers: [@Sendable (LifecycleEvent) -> Void] = []
    /// Well-known names we own, with the flags they were requested with (asked for again on a
    /// new bus connection).
    var ownedNames: [BusName: RequestNameFlags] = [:]
    /// Failed attempts to connect again since the bus was last reached (for the back-off).
    var reconnectFailures = 0
    /// Watched names whose owner we asked the new bus for and have not heard of since.
    var restoringOwners: Set<BusName>?

    /// The address of the system bus: `DBUS_SYSTEM_BUS_ADDRESS`, else libdbus's default.
    package static var systemBusAddress: String {
        if let env = getenv("DBUS_SYSTEM_BUS_ADDRESS"), env.pointee != 0 { return String(cString: env) }
        return "unix:path=/var/run/dbus/system_bus_socket"
    }

    /// Opens a private connection to the system bus (honouring `DBUS_SYSTEM_BUS_ADDRESS`).
    package static func systemBus(label: String = "bluezkit.dbus", reconnect: ReconnectPolicy? = nil)
        async throws(DBusError) -> DBusConnection
    {
        try await open(address: systemBusAddress, label: label, reconnect: reconnect)
    }

    /// Opens a private connection to `address`; registers with the bus (`Hello`) unless `bus` is false.
    ///
    /// The socket connect happens on the new connection's queue; authentication
    /// and `Hello` are asynchronous. Errors: `failed` when the
    /// address cannot be reached, `invalidArgs` for a malformed address.
    ///
    /// With `reconnect` (a bus only), losing the bus is not the end: see ``ReconnectPolicy``.
    /// With `queue` (a serial queue no other connection uses), the connection works on it;
    /// otherwise on a new queue named `label`.
    package static func open(
        address: String, bus: Bool = true, label: String = "bluezkit.dbus", reconnect: ReconnectPolicy? = nil,
        queue given: DispatchQueue? = nil
    ) async throws(DBusError) -> DBusConnection {
        Self.initializeThreads
        let queue = given ?? DispatchQueue(label: label)
        let opened: Result<RawPointer, DBusError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: Self.openRaw(address)) }
        }
        let connection = DBusConnection(
            raw: try opened.get().pointer, queue: queue, isBus: bus,
            reconnection: bus ? reconnect.map { (Self.addressForReconnecting(address), $0) } : nil)
        if bus { try await connection.hello() }
        return connection
    }

    /// `dbus_connection_open_private`, its failure as a `DBusError`. Blocks for the socket connect.
    static func openRaw(_ address: String) -> Result<RawPointer, DBusError> {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard !address.utf8.contains(0), let raw = dbus_connection_open_private(address, &error) else {
            let name = error.name.map { String(cString: $0) } ?? ""
            let text = error.message.map { String(cString: $0) } ?? "cannot connect to '\(address.debugEscaped)'"
            // As documented: a malformed address is invalidArgs, any other failure
            // `failed` (libdbus's own name, such as NoServer, stays in the message).
            let malformed = address.utf8.contains(0) || name == "org.freedesktop.DBus.Error.BadAddress"
            let message = name.isEmpty ? text : "\(name): \(text)"
            return .failure(DBusError(malformed ? .invalidArgs : .failed, message))
        }
        return .success(RawPointer(raw))
    }

    /// A libdbus pointer handed from the queue that made it to the caller, who becomes its only user.
    struct RawPointer: @unchecked Sendable {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
    }

    private static let initializeThreads: Void = { _ = dbus_threads_init_default() }()

    private init(
        raw: OpaquePointer, queue: DispatchQueue, isBus: Bool, reconnection: (String, ReconnectPolicy)?
    ) {
        self.raw = raw
        self.sharedRaw = PosixMutex(RawPointer(raw))
        self.queue = queue
        self.executor = DBusQueueExecutor(queue: queue)
        self.isBus = isBus
        self.reconnection = reconnection.map { (address: $0.0, policy: $0.1) }
        dbus_connection_set_exit_on_disconnect(raw, 0)
        queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
        // Opened from a task on its given queue (a manager's bus queue): already there.
        onQueue { installMainLoop() }
    }

    deinit {
        // The last reference is gone, so no block of ours is queued or running:
        // tearing down here cannot race with the queue.
        tearDown(reason: DBusError(.disconnected, "connection released"))
        dbus_connection_unref(raw)
    }

    /// The unique name the bus gave us (`:1.42`), nil for peer connections.
    package var uniqueName: BusName? { uniqueNameStorage.withLock { $0 } }

    func setUniqueName(_ name: BusName) {
        uniqueNameStorage.withLock { $0 = name }
        _ = dbus_bus_set_unique_name(raw, name.rawValue)
    }

    /// False after `close()` or once the peer disconnected; for a reconnecting connection, false
    /// from losing the bus until it is connected again.
    package var isOpen: Bool { openStorage.load(ordering: .acquiring) }

    /// Whether Unix file descriptors can be passed on this connection.
    package var canPassFileDescriptors: Bool {
        // libdbus locks the connection itself (threads were initialised).
        withRaw { dbus_connection_can_send_type($0, CDBUS_TYPE_UNIX_FD) != 0 }
    }

    /// Runs `body` with the current libdbus connection, from any thread; the connection is not
    /// replaced (nor freed) meanwhile. `body` must not wait for the queue.
    func withRaw<T>(_ body: (OpaquePointer) -> T) -> T {
        sharedRaw.withLock { body($0.pointer) }
    }

    /// Calls `handler` on `queue` once, when the connection is closed for good (a reconnecting
    /// connection: by ``close()`` or its release; see ``onLifecycleEvent(_:)`` for the losses in between).
    package func onDisconnect(_ handler: @escaping @Sendable () -> Void) {
        queue.async {
            if self.isOpen { self.disconnectHandlers.append(handler) } else { handler() }
        }
    }

    /// Closes the connection: pending calls fail with `disconnected`, deferred
    /// replies can no longer be sent, and the bus drops our match rules and names.
    /// Safe to call from any thread, including from a handler on `queue`.
    package func close() {
        onQueue { self.tearDown(reason: DBusError(.disconnected, "connection closed")) }
    }

    /// Whether the caller runs on `queue`.
    var isOnQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) }

    /// Runs `body` on `queue` and waits for it; runs it directly when already there.
    func onQueueThrowing<T>(_ body: () throws(DBusError) -> T) throws(DBusError) -> T {
        if isOnQueue { return try body() }
        let result: Result<T, DBusError> = queue.sync {
            do throws(DBusError) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    package func onQueue<T>(_ body: () -> T) -> T {
        if isOnQueue { return body() }
        return queue.sync(execute: body)
    }

    static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

    /// Sends a message without waiting for anything (signals, replies, calls
    /// that expect no reply). Returns false when the connection is closed.
    ///
    /// On the queue, with none of our sends waiting in it, the message goes to libdbus at once;
    /// otherwise it follows them through the queue (messages keep the order of the calls). At
    /// once spares a hop: a block left on the queue after a `sync` from another thread has a
    /// worker thread woken for it.
    @discardableResult
    package func send(_ message: DBusMessage) -> Bool {
        guard isOpen else { return false }
        if isOnQueue && queuedSends.load(ordering: .relaxed) == 0 { return sendOnQueue(message) }
        queuedSends.add(1, ordering: .relaxed)
        queue.async {
            self.queuedSends.subtract(1, ordering: .relaxed)
            self.sendOnQueue(message)
        }
        return true
    }

    @discardableResult
    func sendOnQueue(_ message: DBusMessage) -> Bool {
        guard isOpen else { return false }
        return dbus_connection_send(raw, message.raw, nil) != 0
    }

    // MARK: Teardown

    /// Ends the connection for good. Queue-confined (or deinit): idempotent.
    func tearDown(reason: DBusError) {
        let wasOpen = openStorage.exchange(false, ordering: .acquiringAndReleasing)
        let wasReconnecting = lifecycle.isReconnecting
        guard wasOpen || wasReconnecting else { return }
        lifecycle = .closed
        if wasOpen { dbus_connection_close(raw) }
        failPendingCalls(reason)
        objects.removeAll()
        router.removeAll()
        for name in Array(nameOwners.keys) {
            for waiter in nameOwners[name]?.becomeKnown() ?? [] { waiter.resume() }
        }
        nameOwners.removeAll()
        ownerWatches.removeAll()
        if wasOpen { removeMainLoop() }
        lifecycleHandlers.removeAll()
        let handlers = disconnectHandlers
        disconnectHandlers.removeAll()
        for handler in handlers { handler() }
    }

    // MARK: Incoming messages

    /// The filter every incoming message passes: signals, calls to our objects, and the replies
    /// to our calls (``takeReply(_:)``). Runs on `queue`, inside dispatch.
    func handleIncoming(_ rawMessage: OpaquePointer) -> DBusHandlerResult {
        let type = dbus_message_get_type(rawMessage)
        if type == CDBUS_MESSAGE_TYPE_SIGNAL {
            if dbus_message_is_signal(rawMessage, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
                queue.async { self.connectionLost(DBusError(.disconnected, "the bus closed the connection")) }
                return DBUS_HANDLER_RESULT_HANDLED
            }
            if restoringOwners != nil { noteOwnerChangeWhileRestoring(rawMessage) }
            routeSignal(DBusMessage(retaining: rawMessage))
            return DBUS_HANDLER_RESULT_HANDLED
        }
        if type == CDBUS_MESSAGE_TYPE_METHOD_CALL {
            dispatchMethodCall(DBusMessage(retaining: rawMessage))
            return DBUS_HANDLER_RESULT_HANDLED
        }
        // A reply to none of our waiting calls (one that timed out or was cancelled) is dropped.
        if type == CDBUS_MESSAGE_TYPE_METHOD_RETURN || type == CDBUS_MESSAGE_TYPE_ERROR {
            _ = takeReply(rawMessage)
            return DBUS_HANDLER_RESULT_HANDLED
        }
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    }
}
