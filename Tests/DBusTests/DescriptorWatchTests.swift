import Dispatch
import Foundation
import Locking
import Synchronization
import TestSupport
import Testing

@testable import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// ``DescriptorReadiness``, the library's replacement for libdispatch's read and write sources:
/// readiness reaches the handler on its queue, a repeating watch fires again after its handler,
/// a one-shot watch once, a cancelled or disabled watch never, and `cancelled` comes after the
/// last handler. The churn test is the pattern that lost a peer's hang-up under libdispatch.
@Suite(.timeLimit(.minutes(2)))
struct DescriptorWatchTests {
    /// A non-blocking `SOCK_SEQPACKET` pair, as bluetoothd's notify and write sockets.
    static func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { throw POSIXError(.EMFILE) }
        return (fds[0], fds[1])
    }

    static func sendByte(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = send(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
    }

    /// Reads what is there; true at the end of the stream.
    static func drain(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count == 0 { return true }
            if count < 0 { return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR }
        }
    }

    @Test func aRepeatingWatchFiresForEachArrivalUntilCancelled() async throws {
        let (ours, peer) = try Self.socketPair()
        defer { close(peer) }
        let queue = DispatchQueue(label: "watch")
        let events = Collected<String>()
        let watch = DescriptorReadiness.repeating(ours, .readable, queue: queue) {
            _ = Self.drain(ours)
            events.append("readable")
        } cancelled: {
            events.append("cancelled")
            close(ours)
        }
        Self.sendByte(peer)
        try await waitUntil("the first datagram is reported") { events.count == 1 }
        Self.sendByte(peer)
        try await waitUntil("the second datagram is reported") { events.count == 2 }
        watch.cancel()
        try await waitUntil("cancelled runs") { events.count == 3 }
        #expect(events.values == ["readable", "readable", "cancelled"])
        #expect(watch.isCancelled)
    }

    /// The shared watcher's thread is named within Linux's 15 bytes (a longer name is refused
    /// and the thread keeps its creator's), so `top -H` and profiles show it.
    @Test func theWatchersThreadIsNamedForTheKernel() async throws {
        let (ours, peer) = try Self.socketPair()
        defer { close(peer) }
        let watch = DescriptorReadiness.repeating(ours, .readable, queue: DispatchQueue(label: "watch")) {
            _ = Self.drain(ours)
        } cancelled: {
            close(ours)
        }
        defer { watch.cancel() }
        let names = { () -> [String] in
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            return tasks.compactMap {
                try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
        try await waitUntil("a thread is named BlueZKit fds") { names().contains("BlueZKit fds") }
    }

    @Test func aOneShotWatchFiresOnceAndCancelsItself() async throws {
        let (ours, peer) = try Self.socketPair()
        defer { close(peer) }
        let events = Collected<String>()
        let watch = DescriptorReadiness.oneShot(ours, .writable, queue: DispatchQueue(label: "watch")) {
            events.append("writable")
        } cancelled: {
            events.append("cancelled")
            close(ours)
        }
        try await waitUntil("the watch fires and is cancelled") { events.count == 2 }
        #expect(events.values == ["writable", "cancelled"])
        #expect(watch.isCancelled)
    }

    @Test func aWatchCancelledBeforeReadinessNeverFires() async throws {
        let (ours, peer) = try Self.socketPair()
        defer { close(peer) }
        let queue = DispatchQueue(label: "watch")
        let events = Collected<String>()
        let watch = DescriptorReadiness.oneShot(ours, .readable, queue: queue) {
            events.append("readable")
        } cancelled: {
            events.append("cancelled")
            close(ours)
        }
        watch.cancel()
        try await waitUntil("cancelled runs") { events.count == 1 }
        let other = try Self.socketPair()
        defer {
            close(other.0)
            close(other.1)
        }
        Self.sendByte(other.1)
        let marker = DescriptorReadiness.oneShot(other.0, .readable, queue: queue) { events.append("marker") }
        try await waitUntil("a later watch fires") { events.count == 2 }
        #expect(events.values == ["cancelled", "marker"])
        #expect(marker.isCancelled)
    }

    @Test func aDisabledWatchWaitsUntilEnabled() async throws {
        let (ours, peer) = try Self.socketPair()
        defer {
            close(ours)
            close(peer)
        }
        let queue = DispatchQueue(label: "watch")
        let events = Collected<String>()
        let watch = DescriptorReadiness.repeating(ours, .readable, queue: queue, enabled: false) {
            _ = Self.drain(ours)
            events.append("readable")
        }
        defer { watch.cancel() }
        Self.sendByte(peer)
        // A later watch on the same socket pair's other end fires; the disabled one must not have.
        let marker = Collected<String>()
        let probe = DescriptorReadiness.oneShot(peer, .writable, queue: queue) { marker.append("probe") }
        try await waitUntil("the probe fires") { marker.count == 1 }
        queue.sync {}
        #expect(events.count == 0, "a disabled watch fired")
        #expect(probe.isCancelled)
        watch.setEnabled(true)
        try await waitUntil("the enabled watch reports the waiting datagram") { events.count == 1 }
        watch.setEnabled(false)
        Self.sendByte(peer)
        let second = Collected<String>()
        _ = DescriptorReadiness.oneShot(peer, .writable, queue: queue) { second.append("probe") }
        try await waitUntil("the second probe fires") { second.count == 1 }
        queue.sync {}
        #expect(events.count == 1, "a watch fired after it was disabled")
    }

    /// Many sockets at once on four queues, each with a repeating reader and one-shot writable
    /// waits, the peer sending and closing: every socket's end is reported, once, and its
    /// `cancelled` closes it after its handlers. libdispatch's sources lost one in a few hundred
    /// thousand of these (the socket never reported, so never closed); here the count must be exact.
    @Test func everyHangUpIsReportedUnderChurn() async throws {
        let rounds = 400
        let queues = (0..<4).map { DispatchQueue(label: "churn \($0)") }
        let ended = Atomic(0)
        let closedDescriptors = Atomic(0)
        let handlerAfterCancel = Atomic(0)
        for round in 0..<rounds {
            for queue in queues {
                let (ours, peer) = try Self.socketPair()
                let state = PosixMutex((cancelled: false, writable: nil as DescriptorReadiness?))
                let remaining = Atomic(1)
                let closeIfLast: @Sendable () -> Void = {
                    if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                        close(ours)
                        closedDescriptors.add(1, ordering: .relaxed)
                    }
                }
                let readerBox = PosixMutex<DescriptorReadiness?>(nil)
                let reader = DescriptorReadiness.repeating(ours, .readable, queue: queue) {
                    if state.withLock({ $0.cancelled }) { handlerAfterCancel.add(1, ordering: .relaxed) }
                    guard Self.drain(ours) else { return }
                    ended.add(1, ordering: .relaxed)
                    readerBox.withLock { watch in
                        watch?.cancel()
                        watch = nil
                    }
                    state.withLock { $0.writable?.cancel() }
                } cancelled: {
                    state.withLock { $0.cancelled = true }
                    closeIfLast()
                }
                readerBox.withLock { $0 = reader }
                if round % 2 == 0 {
                    remaining.add(1, ordering: .relaxed)
                    let writable = DescriptorReadiness.oneShot(ours, .writable, queue: queue) {
                    } cancelled: {
                        closeIfLast()
                    }
                    state.withLock { $0.writable = writable }
                }
                Self.sendByte(peer)
                close(peer)
            }
        }
        let total = rounds * queues.count
        try await waitUntil("every socket's end is reported", timeout: .seconds(60)) {
            ended.load(ordering: .relaxed) == total && closedDescriptors.load(ordering: .relaxed) == total
        }
        for queue in queues { queue.sync {} }
        #expect(ended.load(ordering: .relaxed) == total)
        #expect(closedDescriptors.load(ordering: .relaxed) == total)
        #expect(handlerAfterCancel.load(ordering: .relaxed) == 0)
    }
}
