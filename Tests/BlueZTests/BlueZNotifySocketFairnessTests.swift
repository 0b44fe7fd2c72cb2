import BlueZ
import DBus
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A notify socket that never runs dry must not keep the connection's queue to itself
/// (issue 18): other work queued there runs while the values keep coming.
@Suite(.timeLimit(.minutes(1)))
struct BlueZNotifySocketFairnessTests {
    @Test func aSocketThatNeverRunsDryLetsOtherWorkRun() async throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair) == 0)
        let writer = pair[1]
        let queue = DispatchQueue(label: "test.notify-fairness")
        let received = Atomic<Int>(0)
        let otherWorkRan = Atomic<Bool>(false)
        let socket = BlueZNotifySocket(
            descriptor: UnixFileDescriptor(owning: pair[0]), mtu: 23, queue: queue,
            onValue: { _ in
                // Each value costs the app a little: the writer always stays ahead.
                usleep(50)
                received.add(1, ordering: .relaxed)
            }, onClose: {})
        // The peer writes as fast as the socket takes it (blocking when full) until the other
        // work has run, or for at most 30 s.
        let writerDone = Atomic<Bool>(false)
        Thread.detachNewThread {
            let deadline = ContinuousClock.now + .seconds(30)
            var value: (UInt8, UInt8) = (0, 60)
            while !otherWorkRan.load(ordering: .relaxed), ContinuousClock.now < deadline {
                if send(writer, &value, 2, Int32(MSG_NOSIGNAL)) < 0 { break }
            }
            writerDone.store(true, ordering: .relaxed)
        }
        try await waitUntil("values flow") { received.load(ordering: .relaxed) > 10 }
        queue.async { otherWorkRan.store(true, ordering: .relaxed) }
        // Before: the reading thread stayed in one visit to the queue for as long as data came.
        try await waitUntil("the other work ran while values kept coming") { otherWorkRan.load(ordering: .relaxed) }
        socket.close()
        try await waitUntil("the writer stopped") { writerDone.load(ordering: .relaxed) }
        close(writer)
    }
}
