import BlueZ
import Dispatch
import Foundation
import Glibc
import Locking
import TestSupport
import Testing

/// A listener survives `accept` failures that say the system is busy (out of descriptors or
/// memory) or that one connection failed, backing off instead of spinning; only a broken
/// listening socket ends it. The kernel's `accept` is stood in for (``BlueZAcceptCall``) on an
/// `AF_UNIX` `SOCK_SEQPACKET` listener, which has the datagram semantics of an L2CAP one.
@Suite(.timeLimit(.minutes(1))) struct L2CAPListenerTests {
    /// A listening `AF_UNIX` socket at a fresh abstract address, and a way to connect to it.
    final class UnixListener: Sendable {
        let fd: Int32
        let name: String
        init() throws {
            fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
            name = "bluezkit-listener-test-\(UUID().uuidString)"
            let status = Self.withAddress(name) { bind(fd, $0, $1) }
            guard fd >= 0, status == 0, listen(fd, 8) == 0 else {
                throw BlueZSocketError(errno: errno, operation: "listen")
            }
        }

        /// A client connected to the listener (the caller closes it).
        func connectClient() throws -> Int32 {
            let client = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue | SOCK_CLOEXEC.rawValue), 0)
            guard Self.withAddress(name, { Glibc.connect(client, $0, $1) }) == 0 else {
                throw BlueZSocketError(errno: errno, operation: "connect")
            }
            return client
        }

        static func withAddress<T>(_ name: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(name.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) { path in
                path[0] = 0  // abstract: nothing on the file system
                for (index, byte) in bytes.enumerated() { path[index + 1] = byte }
            }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
            }
        }
    }

    /// The kernel's `accept` after the scripted failures, reporting an LE peer's address (an
    /// `AF_UNIX` peer has none a listener would take); each call's time is recorded.
    final class ScriptedAccept: Sendable {
        let failures: PosixMutex<[Int32]>
        let calls = PosixMutex<[(ContinuousClock.Instant, Int32?)]>([])
        init(failures: [Int32]) { self.failures = PosixMutex(failures) }

        var call: BlueZAcceptCall {
            BlueZAcceptCall { [self] listener, address in
                let failure = failures.withLock { $0.isEmpty ? nil : $0.removeFirst() }
                calls.withLock { $0.append((.now, failure)) }
                if let failure { return .failure(BlueZAcceptCall.Errno(failure)) }
                let result = BlueZAcceptCall.system.call(listener, address)
                let peer = BlueZL2CAPSocketAddress(address: "00:AA:01:02:03:04", type: .leRandom, psm: 0x80)
                for (index, byte) in (peer.encoded() ?? []).enumerated() where index < address.count {
                    address[index] = byte
                }
                return result
            }
        }
    }

    @Test func aBusySystemPausesAcceptingWithBackOffAndListeningGoesOn() async throws {
        let unix = try UnixListener()
        let script = ScriptedAccept(failures: [EMFILE, ENFILE, ENOBUFS, ECONNABORTED, EINTR, ENOMEM])
        let queue = DispatchQueue(label: "test.l2cap.listener")
        let listener = BlueZL2CAPListener(adopting: unix.fd, psm: 0x80, queue: queue, acceptCall: script.call)
        let results = PosixMutex<[Result<BlueZL2CAPListener.Accepted, BlueZSocketError>]>([])
        queue.sync { listener.accept { result in results.withLock { $0.append(result) } } }
        defer { queue.sync { listener.close() } }

        let client = try unix.connectClient()
        defer { close(client) }
        try await waitUntil("the channel is accepted after the failures") { results.withLock { $0.count } == 1 }
        guard case .success(let accepted)? = results.withLock({ $0.first }) else {
            Issue.record("listening ended: \(results.withLock { $0 })")
            return
        }
        #expect(accepted.peer.address == "00:AA:01:02:03:04")
        queue.sync { accepted.socket.close() }

        // Each shortage paused accepting, longer each time: 10 ms, 20 ms, 40 ms (ECONNABORTED and
        // EINTR concern one connection: the next one is accepted at once, after the ENOBUFS pause).
        let calls = script.calls.withLock { $0 }
        #expect(calls.prefix(7).map(\.1) == [EMFILE, ENFILE, ENOBUFS, ECONNABORTED, EINTR, ENOMEM, nil])
        func gap(_ index: Int) -> Duration { calls[index + 1].0 - calls[index].0 }
        #expect(gap(0) >= .milliseconds(10) && gap(1) >= .milliseconds(20) && gap(2) >= .milliseconds(40))
        #expect(gap(5) >= .milliseconds(80))

        // Still listening: a second channel is accepted without any wait.
        let second = try unix.connectClient()
        defer { close(second) }
        try await waitUntil("a second channel is accepted") { results.withLock { $0.count } == 2 }
        if case .success(let accepted)? = results.withLock({ $0.last }) { queue.sync { accepted.socket.close() } }
    }

    @Test func aBrokenListeningSocketEndsListening() async throws {
        let unix = try UnixListener()
        let script = ScriptedAccept(failures: [EBADF])
        let queue = DispatchQueue(label: "test.l2cap.listener")
        let listener = BlueZL2CAPListener(adopting: unix.fd, psm: 0x80, queue: queue, acceptCall: script.call)
        let results = PosixMutex<[Result<BlueZL2CAPListener.Accepted, BlueZSocketError>]>([])
        queue.sync { listener.accept { result in results.withLock { $0.append(result) } } }
        let client = try unix.connectClient()
        defer { close(client) }
        try await waitUntil("listening ends") { results.withLock { $0.count } == 1 }
        guard case .failure(let error)? = results.withLock({ $0.first }) else {
            Issue.record("expected the end of listening")
            return
        }
        #expect(error.errno == EBADF)
        #expect(script.calls.withLock { $0.count } == 1, "no accept after the end")
    }

    @Test func theBackOffDoublesFrom10MillisecondsUpToOneSecond() {
        let delays = (1...9).map { BlueZAcceptCall.backOffDelay(afterFailures: $0) }
        #expect(delays == [10, 20, 40, 80, 160, 320, 640, 1000, 1000].map { Duration.milliseconds($0) })
        #expect(BlueZAcceptCall.recovery(from: .init(EMFILE)) == .backOff)
        #expect(BlueZAcceptCall.recovery(from: .init(ECONNABORTED)) == .acceptNext)
        #expect(BlueZAcceptCall.recovery(from: .init(EAGAIN)) == .waitForReadable)
        #expect(BlueZAcceptCall.recovery(from: .init(EINVAL)) == .stop)
    }
}
