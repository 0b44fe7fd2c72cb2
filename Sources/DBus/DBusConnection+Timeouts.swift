internal import CDBus
import Dispatch

/// The deadlines of our method calls (`DBusConnection+Calls.swift`) and libdbus's own timeouts
/// (each with its own interval; libdbus adds them for its pending calls, which we no longer
/// make) — served by one dispatch timer per connection, armed for the earliest deadline.
///
/// A dispatch timer per timeout cost every method call a source made, scheduled, resumed,
/// cancelled and disposed of (about a tenth of the client's instructions per round trip). Here
/// a call or a timeout added re-arms the timer only when its deadline comes before the one the
/// timer is armed for; one that ends is only forgotten (the timer, if it fires for nothing, arms
/// itself for the earliest deadline left). When it fires, every call and timeout whose deadline
/// has passed is handled, in one go, then the incoming queue is drained.
///
/// Queue-confined, like the rest of the main loop: libdbus adds, toggles and removes timeouts
/// from calls made on the queue (holding its lock, so these only touch our table and timer).
extension DBusConnection {
    /// One enabled libdbus timeout.
    struct TimeoutEntry {
        let timeout: OpaquePointer
        /// When it fires next (`DispatchTime.uptimeNanoseconds`).
        var deadline: UInt64
        /// libdbus's interval, in nanoseconds: a timeout fires again each interval until removed.
        let interval: UInt64
    }

    /// The connection's timeouts and their one timer. Queue-confined.
    ///
    /// Each enabled timeout keeps its index in `entries`, plus one, as its libdbus data
    /// (`dbus_timeout_set_data`): adding and removing one (twice per method call) is an index,
    /// not a hash-table probe. Removal moves the last entry into the hole and updates its index.
    struct TimeoutTable {
        var entries: [TimeoutEntry] = []
        /// Created on first use; cancelled with the main loop.
        var timer: (any DispatchSourceTimer)?
        /// The deadline the timer is armed for, `UInt64.max` when it is not.
        var armedDeadline = UInt64.max

        /// The index of `timeout` in `entries`, nil when it is not there.
        func index(of timeout: OpaquePointer) -> Int? {
            guard let data = dbus_timeout_get_data(timeout) else { return nil }
            let index = Int(bitPattern: data) - 1
            return index < entries.count && entries[index].timeout == timeout ? index : nil
        }

        /// Whether `timeout` is still in the table, without touching it (it may have been freed).
        func contains(_ timeout: OpaquePointer) -> Bool { entries.contains { $0.timeout == timeout } }

        mutating func set(_ entry: TimeoutEntry) {
            if let index = index(of: entry.timeout) {
                entries[index] = entry
            } else {
                entries.append(entry)
                Self.setIndex(entries.count - 1, of: entry.timeout)
            }
        }

        mutating func remove(_ timeout: OpaquePointer) {
            guard let index = index(of: timeout) else { return }
            dbus_timeout_set_data(timeout, nil, nil)
            let last = entries.removeLast()
            if index < entries.count {
                entries[index] = last
                Self.setIndex(index, of: last.timeout)
            }
        }

        private static func setIndex(_ index: Int, of timeout: OpaquePointer) {
            dbus_timeout_set_data(timeout, UnsafeMutableRawPointer(bitPattern: index + 1), nil)
        }
    }

    /// libdbus added or toggled `timeout`: (re)starts its interval from now, or forgets it when
    /// it is disabled.
    func updateTimeout(_ timeout: OpaquePointer) {
        guard dbus_timeout_get_enabled(timeout) != 0 else {
            timeouts.remove(timeout)
            return
        }
        let interval = UInt64(max(1, dbus_timeout_get_interval(timeout))) * 1_000_000
        let deadline = DispatchTime.now().uptimeNanoseconds &+ interval
        timeouts.set(TimeoutEntry(timeout: timeout, deadline: deadline, interval: interval))
        if deadline < timeouts.armedDeadline { armTimeoutTimer(at: deadline) }
    }

    /// libdbus removed `timeout` (its call was answered, cancelled or timed out).
    func removeTimeout(_ timeout: OpaquePointer) {
        timeouts.remove(timeout)
    }

    /// Forgets every timeout and cancels the timer (the main loop is going away).
    func removeAllTimeouts() {
        timeouts.timer?.cancel()
        timeouts = TimeoutTable()
    }

    func armTimeoutTimer(at deadline: UInt64) {
        let timer = timeouts.timer ?? makeTimeoutTimer()
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: deadline))
        timeouts.armedDeadline = deadline
    }

    /// The connection's one timeout timer, made on first use (resumed: it fires once scheduled).
    private func makeTimeoutTimer() -> any DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.timeoutTimerFired() }
        timeouts.timer = timer
        timer.resume()
        return timer
    }

    /// Fails every call that is due, handles every timeout that is due, drains, and arms the
    /// timer for the earliest deadline left.
    private func timeoutTimerFired() {
        timeouts.armedDeadline = .max
        let now = DispatchTime.now().uptimeNanoseconds
        let nextCall = expireCalls(now: now)
        let due = timeouts.entries.filter { $0.deadline <= now }
        if !due.isEmpty {
            // Each fires again an interval later unless libdbus removes it (a pending call's does).
            for entry in due {
                if let index = timeouts.index(of: entry.timeout) {
                    timeouts.entries[index].deadline = now &+ entry.interval
                }
            }
            handleThenDrain {
                for entry in due.sorted(by: { $0.deadline < $1.deadline }) {
                    // Handling one may remove (and libdbus free) another: look it up by address only.
                    guard timeouts.contains(entry.timeout) else { continue }
                    _ = dbus_timeout_handle(entry.timeout)
                }
            }
        }
        // Unless the main loop went away meanwhile (the table is then empty, the timer gone).
        let next = min(nextCall, timeouts.entries.lazy.map(\.deadline).min() ?? .max)
        if timeouts.timer != nil, next < timeouts.armedDeadline {
            armTimeoutTimer(at: next)
        }
    }
}
