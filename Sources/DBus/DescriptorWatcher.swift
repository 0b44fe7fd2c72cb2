import Foundation
import Locking
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The thread of ``DescriptorReadiness/Delivery/shared``: it polls the descriptors of every armed
/// shared ``DescriptorReadiness`` in the process.
///
/// Its table (under one lock) is the only record of what is watched: each pass builds the
/// `poll` set from the armed entries, and a ready entry is disarmed and handed to its watch only
/// if it is still in the table and still armed — so an event for a watch cancelled meanwhile,
/// or for a descriptor number that now belongs to someone else, is dropped, and nothing is left
/// registered anywhere when a watch goes. A change to the table wakes the thread through a
/// socket pair so that it polls the new set.
///
/// One thread for the process, started with the first watch and never ended (as libdispatch's
/// event thread). The same descriptor may be in several watches (a socket's readable and
/// writable waits): `poll` takes each entry on its own.
final class DescriptorWatcher: Sendable {
    static let shared = DescriptorWatcher()

    private struct Entry {
        let watch: DescriptorReadiness
        /// In the next `poll` set.
        var armed: Bool
        /// Handed to its queue and not yet handled (a repeating watch is armed again after).
        var delivering = false
        /// A repeating watch's wish (``DescriptorReadiness/setEnabled(_:)``).
        var enabled: Bool
    }

    private let table = PosixMutex<[UInt64: Entry]>([:])
    private let ids = Atomic<UInt64>(0)
    /// The end written to wake the thread, and the end it reads.
    private let wakeWrite: Int32
    private let wakeRead: Int32

    private init() {
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        (wakeRead, wakeWrite) = (try? SystemCall.socketPair(AF_UNIX, flags).get()) ?? (-1, -1)
        Thread.detachNewThread { [self] in
            // Within Linux's 15 bytes (a longer name is refused): "BlueZKit descriptors" never applied.
            SystemCall.nameCurrentThread("BlueZKit fds")
            run()
        }
    }

    func nextID() -> UInt64 { ids.add(1, ordering: .relaxed).newValue }

    func add(_ watch: DescriptorReadiness, armed: Bool) {
        table.withLock { $0[watch.id] = Entry(watch: watch, armed: armed, enabled: armed) }
        if armed { wake() }
    }

    func remove(_ watch: DescriptorReadiness) {
        let wasArmed = table.withLock { $0.removeValue(forKey: watch.id)?.armed ?? false }
        if wasArmed { wake() }
    }

    func setEnabled(_ watch: DescriptorReadiness, _ enabled: Bool) {
        let armed = table.withLock { table -> Bool in
            guard var entry = table[watch.id] else { return false }
            entry.enabled = enabled
            let arm = enabled && !entry.delivering && !entry.armed
            if !enabled { entry.armed = false }
            if arm { entry.armed = true }
            table[watch.id] = entry
            return arm
        }
        if armed { wake() }
    }

    /// A repeating watch's handler returned: armed again if still enabled.
    func handled(_ watch: DescriptorReadiness) {
        let armed = table.withLock { table -> Bool in
            guard var entry = table[watch.id] else { return false }
            entry.delivering = false
            entry.armed = entry.enabled
            table[watch.id] = entry
            return entry.armed
        }
        if armed { wake() }
    }

    private func wake() { SystemCall.wake(wakeWrite) }

    private func run() {
        var descriptors: [pollfd] = []
        var watched: [UInt64] = []
        // Without a wake-up socket (descriptor limit) changes are seen within 5 ms.
        let timeout: Int32 = wakeRead >= 0 ? -1 : 5
        while true {
            descriptors.removeAll(keepingCapacity: true)
            watched.removeAll(keepingCapacity: true)
            descriptors.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            table.withLock { table in
                for (id, entry) in table where entry.armed {
                    descriptors.append(pollfd(fd: entry.watch.fd, events: entry.watch.events, revents: 0))
                    watched.append(id)
                }
            }
            let polled = descriptors.withUnsafeMutableBufferPointer {
                SystemCall.poll($0.baseAddress!, count: $0.count, timeout: timeout)
            }
            guard case .success(let ready) = polled else {
                usleep(1000)  // EINVAL, ENOMEM: wait for the set to change
                continue
            }
            if ready == 0 { continue }
            if descriptors[0].revents != 0 { SystemCall.drain(wakeRead) }
            for index in watched.indices where descriptors[index + 1].revents != 0 {
                let id = watched[index]
                let watch = table.withLock { table -> DescriptorReadiness? in
                    guard var entry = table[id], entry.armed else { return nil }
                    entry.armed = false
                    entry.delivering = true
                    table[id] = entry
                    return entry.watch
                }
                watch?.deliver()
            }
        }
    }
}
