internal import CDBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// The main loop, modelled on BlueZ's `gdbus/mainloop.c`: a libdbus read watch becomes a
/// ``DescriptorReadiness`` with a thread of its own that handles it inside `queue.sync`
/// (`.dedicated(.poll)`), a write watch a shared one, libdbus timeouts one dispatch timer for them all
/// (`DBusConnection+Timeouts.swift`), and the dispatch-status callback only schedules a drain on the queue —
/// never dispatching inside a libdbus callback.
///
/// libdbus calls the watch and timeout functions while it holds the
/// connection's lock, so they only create, toggle and cancel sources.
extension DBusConnection {
    /// The reading thread and the write watch of one `DBusWatch`.
    ///
    /// `@unchecked Sendable`: touched only on the connection's queue, where its handlers run
    /// (the reading thread's inside `queue.sync`, the write watch's on the queue itself), or
    /// inside libdbus's callbacks (under its lock).
    final class WatchSources: @unchecked Sendable {
        var read: DescriptorReadiness?
        var write: DescriptorReadiness?
        /// Set when libdbus removes the watch (it may then free it): an event already on its
        /// way is dropped without touching the watch. Its handlers check this, not `watches`,
        /// saving a hash-table probe per incoming message.
        var removed = false
    }

    /// Runs `body` with the connection libdbus's callbacks carry as their data, without a
    /// retain and release around it: libdbus calls them only from calls this connection makes
    /// (so it is alive), and `DBusConnection` has a side table (closures elsewhere hold it
    /// weakly), which makes each retain and release the slow path — four or five per method call.
    @inline(__always)
    static func from<Result>(_ data: UnsafeMutableRawPointer, _ body: (DBusConnection) -> Result) -> Result {
        Unmanaged<DBusConnection>.fromOpaque(data)._withUnsafeGuaranteedRef(body)
    }

    func installMainLoop() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_watch_functions(
            raw,
            { watch, data in
                guard let watch, let data else { return 0 }
                DBusConnection.from(data) { $0.addWatch(watch) }
                return 1
            },
            { watch, data in
                guard let watch, let data else { return }
                DBusConnection.from(data) { $0.removeWatch(watch) }
            },
            { watch, data in
                guard let watch, let data else { return }
                DBusConnection.from(data) { $0.toggleWatch(watch) }
            },
            me, nil)
        dbus_connection_set_timeout_functions(
            raw,
            { timeout, data in
                guard let timeout, let data else { return 0 }
                DBusConnection.from(data) { $0.updateTimeout(timeout) }
                return 1
            },
            { timeout, data in
                guard let timeout, let data else { return }
                DBusConnection.from(data) { $0.removeTimeout(timeout) }
            },
            { timeout, data in
                guard let timeout, let data else { return }
                DBusConnection.from(data) { $0.updateTimeout(timeout) }
            },
            me, nil)
        dbus_connection_set_dispatch_status_function(
            raw,
            { _, status, data in
                guard let data, status == DBUS_DISPATCH_DATA_REMAINS else { return }
                DBusConnection.from(data) { $0.scheduleDrain() }
            },
            me, nil)
        dbus_connection_set_wakeup_main_function(
            raw,
            { data in
                guard let data else { return }
                DBusConnection.from(data) { $0.scheduleDrain() }
            },
            me, nil)
        _ = dbus_connection_add_filter(
            raw,
            { _, message, data in
                guard let message, let data else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
                return DBusConnection.from(data) { $0.handleIncoming(message) }
            },
            me, nil)
        if dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS { scheduleDrain() }
    }

    /// Detaches every callback (libdbus then removes its watches and timeouts through them).
    func removeMainLoop() {
        dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        dbus_connection_set_wakeup_main_function(raw, nil, nil, nil)
        for key in Array(watches.keys) { cancel(watches.removeValue(forKey: key)!) }
        removeAllTimeouts()
    }

    /// Asks for one drain of the incoming queue; coalesces repeated requests.
    ///
    /// libdbus calls the wake-up function once per message it queues (from any
    /// thread, holding its lock), so only the first request until the drain runs
    /// costs a hop to the queue.
    func scheduleDrain() {
        guard !drainRequested.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [weak self] in
            guard let self else { return }
            self.drainRequested.store(false, ordering: .releasing)
            self.drain()
        }
    }

    /// Dispatches every message libdbus has read, on `queue`.
    func drain() {
        drainScheduled = false
        while isOpen, dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
    }

    // MARK: Watches

    private func addWatch(_ watch: OpaquePointer) {
        let key = UnsafeMutableRawPointer(watch)
        let fd = dbus_watch_get_unix_fd(watch)
        let flags = dbus_watch_get_flags(watch)
        let sources = WatchSources()
        if flags & DBUS_WATCH_READABLE.rawValue != 0 {
            // The thread polls a duplicate it closes itself (libdbus closes its socket right after
            // removing the watch); without one (no descriptor left) it polls libdbus's own.
            let duplicate = fcntl(fd, F_DUPFD_CLOEXEC, 0)
            nonisolated(unsafe) let (key, watch) = (key, watch)
            sources.read = DescriptorReadiness.dedicated(
                duplicate >= 0 ? duplicate : fd, .poll, closesDescriptor: duplicate >= 0, queue: queue, enabled: false,
                runsWorkAfterEvent: true
            ) { [weak self] in
                self?.handleWatch(sources, watch, DBUS_WATCH_READABLE.rawValue)
                return true
            } onFailure: { [weak self] reason in
                guard let self else { return }
                DBusLog.warning("the connection's reading thread stopped: \(reason)")
                self.queue.async {
                    // Only if this watch is still the connection's (not one of an earlier socket).
                    guard self.watches[key] != nil else { return }
                    self.connectionLost(DBusError(.disconnected, reason))
                }
            }
        }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 {
            // libdbus's own socket: libdbus closes it right after removing the watch, which cancels
            // this (a poll of the old number is then dropped), and a handler already on its way
            // checks `removed` before touching the watch.
            nonisolated(unsafe) let watch = watch
            sources.write = DescriptorReadiness.repeating(fd, .writable, queue: queue, enabled: false) { [weak self] in
                self?.handleWatch(sources, watch, DBUS_WATCH_WRITABLE.rawValue)
            }
        }
        watches[key] = sources
        toggleWatch(watch)
    }

    private func handleWatch(_ sources: WatchSources, _ watch: OpaquePointer, _ condition: UInt32) {
        // The watch may have been removed or disabled while this event was on its way.
        guard !sources.removed, dbus_watch_get_enabled(watch) != 0 else { return }
        handleThenDrain { _ = dbus_watch_handle(watch, condition) }
    }

    /// Runs `handle` (a libdbus watch or timeout handler), then drains the incoming queue.
    ///
    /// The handler queues what it read, and libdbus then asks for a drain (the dispatch-status
    /// callback): since one follows at once, that request is taken as made, saving a block on
    /// the queue (a hop to a worker thread) that would find nothing left to dispatch.
    func handleThenDrain(_ handle: () -> Void) {
        let requested = drainRequested.exchange(true, ordering: .acquiringAndReleasing)
        handle()
        // A request made meanwhile (from any thread) is served by the drain below; one made
        // before is still queued, and clears the flag itself.
        if !requested { drainRequested.store(false, ordering: .releasing) }
        drain()
    }

    private func toggleWatch(_ watch: OpaquePointer) {
        guard let sources = watches[UnsafeMutableRawPointer(watch)] else { return }
        let enabled = dbus_watch_get_enabled(watch) != 0
        sources.read?.setEnabled(enabled)
        sources.write?.setEnabled(enabled)
    }

    private func removeWatch(_ watch: OpaquePointer) {
        guard let sources = watches.removeValue(forKey: UnsafeMutableRawPointer(watch)) else { return }
        cancel(sources)
    }

    /// Ends the reading thread and cancels the write watch.
    private func cancel(_ sources: WatchSources) {
        sources.removed = true
        sources.read?.cancel()
        sources.write?.cancel()
    }
}
