import Foundation
import Locking
import Synchronization
import TestSupport
import Testing

@testable import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// ``SystemCall``: `EINTR` is retried in its one place (`valueOrErrno`), other errors come back
/// as ``Errno`` values, and a real signal that interrupts a blocked `recv` does not reach the
/// caller — it goes on waiting and gets the data.
@Suite(.timeLimit(.minutes(1)), .serialized)
struct SystemCallTests {
    /// A call that fails with `EINTR` `interruptions` times, then returns 7.
    static func interruptedCall(_ interruptions: Int, calls: inout Int) -> Int {
        calls += 1
        guard calls > interruptions else {
            errno = EINTR
            return -1
        }
        return 7
    }

    @Test func anInterruptedCallIsMadeAgainUntilItIsNot() throws {
        var calls = 0
        let result = SystemCall.valueOrErrno { Self.interruptedCall(3, calls: &calls) }
        #expect(try result.get() == 7)
        #expect(calls == 4)
    }

    @Test func withoutRetryTheInterruptionIsTheResult() {
        var calls = 0
        let result = SystemCall.valueOrErrno(retryOnInterrupt: false) { Self.interruptedCall(3, calls: &calls) }
        #expect(result == .failure(.interrupted))
        #expect(calls == 1)
    }

    @Test func anotherErrorIsReturnedAtOnceAsItsErrno() throws {
        var calls = 0
        let result = SystemCall.valueOrErrno { () -> Int32 in
            calls += 1
            errno = EPIPE
            return -1
        }
        #expect(result == .failure(Errno(EPIPE)))
        #expect(calls == 1)
        // And from a real call: a bad descriptor.
        var byte: UInt8 = 0
        let received = withUnsafeMutableBytes(of: &byte) { SystemCall.receive(-1, into: $0) }
        #expect(received == .failure(Errno(EBADF)))
    }

    /// A thread blocked in `recv` on a blocking socket gets a signal whose handler was installed
    /// without `SA_RESTART` (so the kernel returns `EINTR` instead of restarting the call): the
    /// wrapper must go back to waiting, and return the datagram sent afterwards.
    @Test func aSignalToABlockedReceiveIsNotSeenByTheCaller() async throws {
        let (ours, peer) = try #require(try? SystemCall.socketPair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue)).get())
        defer {
            SystemCall.close(ours)
            SystemCall.close(peer)
        }
        let previous = Interrupts.install()
        defer { Interrupts.restore(previous) }
        let reader = BlockedReader(fd: ours)
        let thread = try await reader.start()
        // Blocked in recvfrom (its number in /proc/self/task/TID/syscall): the signal lands there.
        try await waitUntil("the reader waits in recv") { BlockedReader.inReceive(thread.tid) }
        let before = Interrupts.count.load(ordering: .acquiring)
        #expect(pthread_kill(thread.pthread, SIGUSR2) == 0)
        try await waitUntil("the handler ran") { Interrupts.count.load(ordering: .acquiring) > before }
        // Interrupted, it must be waiting again (without the retry it has returned EINTR).
        try await waitUntil("the reader waits in recv again, or returned") {
            BlockedReader.inReceive(thread.tid) || reader.result.withLock { $0 != nil }
        }
        var bytes: [UInt8] = [0x2A, 0x01]
        #expect(Glibc.send(peer, &bytes, 2, 0) == 2)
        try await waitUntil("the reader returned") { reader.result.withLock { $0 != nil } }
        #expect(reader.result.withLock { $0 } == .success(2))
    }
}

/// The test's `SIGUSR2` handler: counts, and is installed without `SA_RESTART`.
private enum Interrupts {
    static let count = Atomic<Int>(0)

    static func install() -> sigaction {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in Interrupts.count.add(1, ordering: .releasing) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        var previous = sigaction()
        sigaction(SIGUSR2, &action, &previous)
        return previous
    }

    static func restore(_ previous: sigaction) {
        var previous = previous
        sigaction(SIGUSR2, &previous, nil)
    }
}

/// A thread that makes one blocking ``SystemCall/receive(_:into:flags:)`` and keeps its result.
private final class BlockedReader: Sendable {
    struct Started: Sendable {
        let tid: Int32
        let pthread: pthread_t
    }

    let fd: Int32
    let result = PosixMutex<Result<Int, Errno>?>(nil)
    private let started = PosixMutex<Started?>(nil)

    init(fd: Int32) { self.fd = fd }

    /// Starts the thread; returns its kernel and POSIX ids once it runs.
    func start() async throws -> Started {
        Thread.detachNewThread { [self] in
            // Threads may inherit a mask that blocks it (the test runner's): let it through here.
            var mask = sigset_t()
            sigemptyset(&mask)
            sigaddset(&mask, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &mask, nil)
            started.withLock { $0 = Started(tid: Self.currentTID(), pthread: pthread_self()) }
            var buffer = [UInt8](repeating: 0, count: 16)
            let received = buffer.withUnsafeMutableBytes { SystemCall.receive(fd, into: $0) }
            result.withLock { $0 = received }
        }
        try await waitUntil("the reader started") { started.withLock { $0 != nil } }
        return try #require(started.withLock { $0 })
    }

    /// The calling thread's kernel id, from `/proc/thread-self` (`PID/task/TID`).
    static func currentTID() -> Int32 {
        let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        return Int32(target.split(separator: "/").last ?? "") ?? -1
    }

    /// Whether thread `tid` is blocked in `recvfrom` (glibc's `recv`).
    static func inReceive(_ tid: Int32) -> Bool {
        #if arch(x86_64)
            let recvfrom = "45"
        #elseif arch(arm64)
            let recvfrom = "207"
        #else
            let recvfrom = "unknown"
        #endif
        let text = (try? String(contentsOfFile: "/proc/self/task/\(tid)/syscall", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.map(String.init) == recvfrom
    }
}
