import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// ``DescriptorReadiness``'s dedicated policy (a thread per registration, the handler inside
/// `queue.sync`): `cancel()` wakes a thread blocked in its own receive, no handler runs after
/// it, a handler that answers false ends the thread, enabling a `.poll` registration wakes its
/// thread, and in every case the thread closes the descriptor it owns.
@Suite(.timeLimit(.minutes(1)))
struct DescriptorReadinessDedicatedTests {
    /// A blocking `SOCK_SEQPACKET` pair, as AcquireNotify's socket once `BlueZNotifySocket` has it.
    static func blockingPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { throw POSIXError(.EMFILE) }
        return (fds[0], fds[1])
    }

    /// The inode behind `fd`, or nil when `fd` is not open.
    static func inode(_ fd: Int32) -> UInt? {
        var status = stat()
        guard fstat(fd, &status) == 0 else { return nil }
        return UInt(status.st_ino)
    }

    /// Whether `fd` no longer refers to the socket `inode` (closed, or its number reused).
    static func closed(_ fd: Int32, was inode: UInt) -> Bool { Self.inode(fd) != inode }

    /// A blocking receive of one datagram, as `.receive` runs it: true when it got one.
    static func receiveOne(_ fd: Int32, into received: Collected<UInt8>) -> Bool {
        var byte: UInt8 = 0
        guard case .success(let count) = withUnsafeMutableBytes(of: &byte, { SystemCall.receive(fd, into: $0) }),
            count > 0
        else { return false }
        received.append(byte)
        return true
    }

    static func send(_ fd: Int32, _ byte: UInt8) {
        var byte = byte
        _ = Glibc.send(fd, &byte, 1, Int32(MSG_NOSIGNAL))
    }

    @Test func cancelWakesABlockedReceiveAndTheThreadClosesTheDescriptor() async throws {
        let (ours, peer) = try Self.blockingPair()
        defer { close(peer) }
        let inode = try #require(Self.inode(ours))
        let received = Collected<UInt8>()
        let handled = Collected<UInt8>()
        let queue = DispatchQueue(label: "dedicated-receive")
        let readiness = DescriptorReadiness.dedicated(
            ours, .receive { Self.receiveOne($0, into: received) }, closesDescriptor: true, queue: queue
        ) {
            dispatchPrecondition(condition: .onQueue(queue))
            handled.append(received.values.last ?? 0)
            return true
        }
        Self.send(peer, 1)
        try await waitUntil("the datagram reaches the handler") { handled.count == 1 }
        // The thread is back in its blocking receive: only the shutdown can wake it.
        readiness.cancel()
        try await waitUntil("the thread closes the descriptor") { Self.closed(ours, was: inode) }
        #expect(readiness.isCancelled)
        #expect(handled.values == [1])
    }

    @Test func aHandlerThatAnswersFalseEndsTheThread() async throws {
        let (ours, peer) = try Self.blockingPair()
        defer { close(peer) }
        let inode = try #require(Self.inode(ours))
        let received = Collected<UInt8>()
        let handled = Collected<UInt8>()
        let queue = DispatchQueue(label: "dedicated-end")
        let readiness = DescriptorReadiness.dedicated(
            ours, .receive { Self.receiveOne($0, into: received) }, closesDescriptor: true, queue: queue
        ) {
            let byte = received.values.last ?? 0
            handled.append(byte)
            return byte != 2
        }
        Self.send(peer, 1)
        Self.send(peer, 2)
        try await waitUntil("the thread closes the descriptor") { Self.closed(ours, was: inode) }
        #expect(handled.values == [1, 2])
        // A third datagram has nowhere to go: the peer's send fails, or is never read.
        Self.send(peer, 3)
        #expect(handled.values == [1, 2])
        withExtendedLifetime(readiness) {}
    }

    @Test func enablingAPollRegistrationWakesItsThread() async throws {
        let (ours, peer) = try Self.blockingPair()
        defer { close(peer) }
        let inode = try #require(Self.inode(ours))
        let handled = Collected<Bool>()
        let registration = PosixMutex<DescriptorReadiness?>(nil)
        let queue = DispatchQueue(label: "dedicated-poll")
        let readiness = DescriptorReadiness.dedicated(ours, .poll, closesDescriptor: true, queue: queue) {
            var byte: UInt8 = 0
            _ = withUnsafeMutableBytes(of: &byte) { SystemCall.receive(ours, into: $0, flags: Int32(MSG_DONTWAIT)) }
            handled.append(true)
            // As libdbus does from inside its handler: the thread then polls its wake-up socket only.
            registration.withLock { $0?.setEnabled(false) }
            return true
        }
        registration.withLock { $0 = readiness }
        Self.send(peer, 1)
        try await waitUntil("the first datagram is handled") { handled.count == 1 }
        Self.send(peer, 2)
        // Only the wake-up of `setEnabled` makes the thread poll `ours` again.
        readiness.setEnabled(true)
        try await waitUntil("the second datagram is handled once enabled again") { handled.count == 2 }
        registration.withLock { $0 = nil }
        readiness.cancel()
        try await waitUntil("the thread closes the descriptor") { Self.closed(ours, was: inode) }
    }
}
