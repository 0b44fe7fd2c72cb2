import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@testable import BlueZKit

/// Restoration saves coalesced: at most one write per interval, the newest state, off the caller's queue.
@Suite(.timeLimit(.minutes(1))) struct RestorationWriterTests {
    struct Record: RestorationRecord {
        var number: Int
        var isEmpty: Bool { false }
    }

    @Test func aBurstOfChangesIsOneWriteNowAndOneAfterTheInterval() async throws {
        let written = PosixMutex<[Int]>([])
        let writer = RestorationWriter<Record>(lastWritten: nil, interval: .milliseconds(300), label: "test.writer") {
            record in
            written.withLock { $0.append(record.number) }
            return true
        }
        let started = ContinuousClock.now
        writer.submit(Record(number: 1))
        try await waitUntil("the first write") { writer.writeCount == 1 }
        for number in 2...200 { writer.submit(Record(number: number)) }
        try await waitUntil("the newest written", timeout: .seconds(5)) { written.withLock { $0.last } == 200 }
        let intervals = (ContinuousClock.now - started) / .milliseconds(300)
        let writes = written.withLock { $0 }
        #expect(writes.first == 1, "the first change after a quiet interval: at once")
        // One at once, then at most one per interval (a loaded machine may take several for the loop).
        #expect(Double(writes.count) <= 1 + intervals.rounded(.up), "\(writes)")
        #expect(writes == writes.sorted())
    }

    @Test func theNewestStateIsWrittenAndFlushWritesWhatWaits() {
        let written = PosixMutex<[Int]>([])
        let writer = RestorationWriter<Record>(
            lastWritten: Record(number: 0), interval: .seconds(60), label: "test.writer"
        ) {
            record in
            written.withLock { $0.append(record.number) }
            return true
        }
        writer.submit(Record(number: 0))
        writer.flush()
        #expect(written.withLock { $0 } == [], "equal to what the file holds: not written")
        writer.submit(Record(number: 1))
        writer.flush()
        for number in 2...50 { writer.submit(Record(number: number)) }
        #expect(written.withLock { $0 } == [1], "the interval has not passed")
        writer.flush()
        #expect(written.withLock { $0 } == [1, 50])
        writer.submit(Record(number: 51))
        writer.submit(Record(number: 50))
        writer.flush()
        #expect(written.withLock { $0 } == [1, 50], "back to what was written: nothing to write")
    }

    @Test func aFailedWriteIsRetriedWithTheNextChange() {
        let attempts = PosixMutex(0)
        let writer = RestorationWriter<Record>(lastWritten: nil, interval: .zero, label: "test.writer") { _ in
            attempts.withLock { $0 += 1 }
            return attempts.withLock { $0 } > 1
        }
        writer.submit(Record(number: 1))
        writer.flush()
        writer.submit(Record(number: 1))
        writer.flush()
        #expect(attempts.withLock { $0 } == 2)
    }
}
