import BlueZ
import Foundation
import Locking

/// What a central manager has to deliver on its delegate queue, in order, with one drain block
/// on that queue at a time, and bounds on what a flooding peer can pile up there.
///
/// A peripheral that notifies faster than the delegate takes its values, or a scan of many
/// advertisements while the delegate is slow, would otherwise grow the queue by one block per
/// value without end. At most ``notificationLimit`` values of one characteristic
/// (`StartNotify`) and ``discoveryLimit`` discoveries of one peripheral wait; a new one then
/// drops the oldest waiting one of the same characteristic or peripheral (counted, logged).
/// Other events are never dropped.
///
/// ``add(_:)`` runs on any thread (the bus queue); ``next()`` on the delegate queue, from the drain
/// block that ``add(_:)`` asked for. The invariant behind `Sendable`: state behind a `PosixMutex`.
final class CentralDeliveryBacklog: Sendable {
    /// One item to deliver.
    enum Entry: Sendable {
        case event(CentralManager.Event)
        case notification(Data, Characteristic, Peripheral)
    }

    /// How many `StartNotify` values of one characteristic may wait.
    static let notificationLimit = 128
    /// How many discoveries of one peripheral may wait.
    static let discoveryLimit = 16

    private let state = PosixMutex(State())

    private struct State {
        /// Waiting entries in order, dropped ones nil; `entries[head]` is the oldest.
        var entries: [(entry: Entry, key: ObjectIdentifier?)?] = []
        var head = 0
        /// The sequence number of `entries[0]` (entries before it were taken).
        var firstSequence = 0
        /// The sequence numbers of waiting entries, by the characteristic or peripheral they
        /// bound; kept only while more entries wait than the smallest limit (`indexed`): with
        /// fewer, no limit can be reached, and steady traffic costs no hashing.
        var waiting: [ObjectIdentifier: [Int]] = [:]
        var indexed = false
        /// Entries waiting (dropped ones not counted).
        var live = 0
        /// A drain block is scheduled or running.
        var draining = false
        var droppedNotifications = 0
        var droppedDiscoveries = 0
        /// Dropped since the last log line.
        var droppedSinceLog = 0
    }

    /// What ``add(_:)`` did.
    struct Admission: Equatable {
        /// No drain block runs: the caller must schedule one.
        var startDrain: Bool
        /// An older entry was dropped for this one, the first since the last log line.
        var firstDrop: Bool
    }

    /// Appends `entry`; drops the oldest waiting entry of the same characteristic (a notification)
    /// or peripheral (a discovery) when that one has reached its limit.
    func add(_ entry: consuming Entry) -> Admission {
        let (key, limit, isNotification) = Self.bound(of: entry)
        // Moved into the array, not copied (a copy retains the value's storage and both
        // objects, and releases them again).
        var moving = Optional(entry)
        return state.withLock { state in
            let sequence = state.firstSequence + state.entries.count
            state.entries.append((moving.take()!, key))
            state.live += 1
            var firstDrop = false
            if !state.indexed, state.live > Self.discoveryLimit {
                Self.index(&state)
            } else if state.indexed, let key {
                state.waiting[key, default: []].append(sequence)
            }
            // Only while indexed: with fewer entries waiting, no limit can be reached.
            if state.indexed, let key, let oldest = Self.dropOldest(&state.waiting[key, default: []], limit: limit) {
                state.entries[oldest - state.firstSequence] = nil
                state.live -= 1
                if isNotification { state.droppedNotifications += 1 } else { state.droppedDiscoveries += 1 }
                state.droppedSinceLog += 1
                firstDrop = state.droppedSinceLog == 1
            }
            defer { state.draining = true }
            return Admission(startDrain: !state.draining, firstDrop: firstDrop)
        }
    }

    /// The oldest waiting entry, taken; nil when none waits (the drain block then ends, and
    /// the next ``add(_:)`` asks for a new one). `dropped` is how many were dropped since the
    /// last report, to log once the backlog is empty.
    func next() -> (entry: Entry?, dropped: Int) {
        state.withLock { state in
            while state.head < state.entries.count {
                // Moved out, leaving nil (no copy and release of the entry).
                let slot = state.entries[state.head].take()
                state.head += 1
                guard let slot else { continue }
                state.live -= 1
                if state.indexed, let key = slot.key { state.waiting[key]?.removeFirst() }
                Self.compact(&state)
                return (slot.entry, 0)
            }
            // Each value of a steady stream ends its drain here: only what was used is reset.
            if state.head > 0 {
                state.entries.removeAll(keepingCapacity: state.entries.count <= 1024)
                state.firstSequence += state.head
                state.head = 0
            }
            if state.indexed {
                state.waiting.removeAll(keepingCapacity: true)
                state.indexed = false
            }
            state.draining = false
            defer { state.droppedSinceLog = 0 }
            return (nil, state.droppedSinceLog)
        }
    }

    /// How many `StartNotify` values and discoveries were dropped since the manager started.
    var dropped: (notifications: Int, discoveries: Int) {
        state.withLock { ($0.droppedNotifications, $0.droppedDiscoveries) }
    }

    /// How many entries wait (dropped ones not counted).
    var count: Int { state.withLock { $0.live } }

    /// The oldest of a key's waiting list, removed, when the list is longer than `limit`.
    private static func dropOldest(_ list: inout [Int], limit: Int) -> Int? {
        list.count > limit ? list.removeFirst() : nil
    }

    /// Builds `waiting` from the entries that wait.
    private static func index(_ state: inout State) {
        for position in state.head..<state.entries.count {
            guard let key = state.entries[position]?.key else { continue }
            state.waiting[key, default: []].append(state.firstSequence + position)
        }
        state.indexed = true
    }

    /// Drops taken slots at the front once they are the larger part of the array.
    private static func compact(_ state: inout State) {
        guard state.head >= 256, state.head * 2 >= state.entries.count else { return }
        state.entries.removeFirst(state.head)
        state.firstSequence += state.head
        state.head = 0
    }

    /// The characteristic or peripheral whose limit bounds `entry`, that limit, and whether it
    /// is a notification; no key for events that are never dropped.
    private static func bound(of entry: Entry) -> (ObjectIdentifier?, Int, Bool) {
        switch entry {
        case .notification(_, let characteristic, _):
            return (ObjectIdentifier(characteristic), notificationLimit, true)
        case .event(.discovered(let peripheral, _, _, _)):
            return (ObjectIdentifier(peripheral), discoveryLimit, false)
        case .event:
            return (nil, 0, false)
        }
    }
}
