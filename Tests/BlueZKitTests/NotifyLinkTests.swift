import Dispatch
import Foundation
import Locking
import Synchronization
import TestSupport
import Testing

@testable import BlueZ
@testable import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// ``BlueZNotifyLink``, a peripheral's end of one central's `AcquireNotify` socket, against a
/// socket pair whose other end plays bluetoothd: datagrams sent, confirmations read, the end
/// reported once, back-pressure, and many links ending while writable waits come and go (the
/// pattern under which libdispatch's sources, used before, lost hang-ups and crashed).
@Suite(.timeLimit(.minutes(2)))
struct NotifyLinkTests {
    final class Events: Sendable {
        let confirmed = Atomic(0)
        let closed = Atomic(0)
    }

    /// A link on one end of a non-blocking `SOCK_SEQPACKET` pair; the other end is returned.
    static func link(queue: DispatchQueue, events: Events) throws -> (BlueZNotifyLink, Int32) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { throw POSIXError(.EMFILE) }
        let link = BlueZNotifyLink(
            fd: fds[0], deviceAddress: "00:AA:01:00:00:01", mtu: 23, queue: queue,
            onConfirm: { _ in events.confirmed.add(1, ordering: .relaxed) },
            onClose: { _ in events.closed.add(1, ordering: .relaxed) })
        return (link, fds[1])
    }

    @Test func valuesGoOutAndConfirmationsAndTheEndComeBack() async throws {
        let events = Events()
        let (link, peer) = try Self.link(queue: DispatchQueue(label: "link"), events: events)
        #expect(link.send([0x06, 72]) == .sent)
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = recv(peer, &buffer, buffer.count, 0)
        #expect(Array(buffer[..<max(count, 0)]) == [0x06, 72])
        var confirmations: [UInt8] = [1, 1]
        _ = send(peer, &confirmations, 1, 0)
        _ = send(peer, &confirmations, 1, 0)
        try await waitUntil("both confirmations are read") { events.confirmed.load(ordering: .relaxed) == 2 }
        close(peer)
        try await waitUntil("the end is reported") { events.closed.load(ordering: .relaxed) == 1 }
        #expect(link.send([0x06, 73]) == .closed)
        #expect(!link.hasRoom)
        link.close()
        #expect(events.closed.load(ordering: .relaxed) == 1, "reported once, and not after close()")
    }

    @Test func aFullSocketSaysSoAndWhenItHasRoom() async throws {
        let events = Events()
        let (link, peer) = try Self.link(queue: DispatchQueue(label: "link"), events: events)
        defer { close(peer) }
        var sent = 0
        while link.send([UInt8](repeating: 0x55, count: 20)) == .sent { sent += 1 }
        #expect(sent > 0)
        #expect(link.send([0x06, 72]) == .wouldBlock)
        #expect(!link.hasRoom)
        let room = Atomic(false)
        link.whenWritable { room.store(true, ordering: .relaxed) }
        var buffer = [UInt8](repeating: 0, count: 64)
        while recv(peer, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
        try await waitUntil("the wait for room ends") { room.load(ordering: .relaxed) }
        #expect(link.send([0x06, 72]) == .sent)
        link.close()
    }

    /// 2,000 links on four queues, half with a writable wait armed (and one replaced), the peer
    /// confirming once and closing: every link reports exactly one confirmation and one end.
    @Test func everyLinkReportsItsEndWhileWaitsComeAndGo() async throws {
        let queues = (0..<4).map { DispatchQueue(label: "links \($0)") }
        let events = Events()
        var links: [BlueZNotifyLink] = []
        for round in 0..<500 {
            for queue in queues {
                let (link, peer) = try Self.link(queue: queue, events: events)
                if round % 2 == 0 {
                    link.whenWritable {}
                    link.whenWritable {}
                }
                var confirmation: UInt8 = 1
                _ = send(peer, &confirmation, 1, 0)
                close(peer)
                links.append(link)
            }
        }
        try await waitUntil("every link reports its end", timeout: .seconds(60)) {
            events.closed.load(ordering: .relaxed) == links.count
        }
        #expect(events.confirmed.load(ordering: .relaxed) == links.count)
        #expect(events.closed.load(ordering: .relaxed) == links.count)
        for link in links { #expect(link.send([1]) == .closed) }
    }
}
