import BlueZ
import Dispatch
import Foundation
import Glibc
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// The output stream never waits for credits: a peer that stops reading (the kernel then has no
/// credits, or here an `AF_UNIX` pair has no buffer room) gets 0 from `write`, and the stream's
/// delegate hears `hasSpaceAvailable` once the peer reads again.
@Suite(.timeLimit(.minutes(1))) struct L2CAPStreamCreditTests {
    @Test func aWriteTheSocketCannotTakeReturnsZeroAndSpaceIsAnnouncedLater() async throws {
        let pair = try L2CAPChannelTests.Pair()
        let recorder = L2CAPChannelTests.EventRecorder()
        let done = PosixMutex(false)
        nonisolated(unsafe) let output = pair.channel.outputStream
        let runLoopThread = Thread {
            output.delegate = recorder
            output.schedule(in: .current, forMode: .default)
            output.open()
            while !done.withLock({ $0 }) { _ = RunLoop.current.run(mode: .default, before: Date() + 0.05) }
        }
        runLoopThread.start()
        defer { done.withLock { $0 = true } }
        let spaceEvent = Stream.Event.hasSpaceAvailable.rawValue
        try await waitUntil("open, with space") { recorder.events.withLock { $0 }.contains(spaceEvent) }

        // The peer reads nothing: writes fill the socket until one cannot go. On a thread of
        // its own, so that a write that waited (before: for ever) fails the wait below.
        let results = PosixMutex<[Int]>([])
        let writer = Thread {
            let bytes = [UInt8](repeating: 5, count: 100)
            for _ in 0..<1_000_000 {
                let written = output.write(bytes, maxLength: bytes.count)
                results.withLock { $0.append(written) }
                if written <= 0 { return }
            }
        }
        writer.start()
        try await waitUntil("a write finds the socket full") { results.withLock { $0.last } == 0 }
        let sent = results.withLock { $0.dropLast() }
        #expect(!sent.isEmpty && sent.allSatisfy { $0 == 100 })
        #expect(!output.hasSpaceAvailable, "no space until the socket is writable again")
        #expect(output.streamStatus == .open)

        // The peer reads everything: space is announced, and writes go again.
        let spaceEventsBefore = recorder.events.withLock { $0.filter { $0 == spaceEvent }.count }
        var buffer = [UInt8](repeating: 0, count: 200)
        var drained = 0
        while recv(pair.peer, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 { drained += 1 }
        #expect(drained == sent.count)
        try await waitUntil("space is announced") {
            recorder.events.withLock { $0.filter { $0 == spaceEvent }.count } > spaceEventsBefore
        }
        #expect(output.hasSpaceAvailable)
        #expect(output.write([1, 2, 3], maxLength: 3) == 3)
        #expect(pair.receive() == [1, 2, 3])
    }
}
