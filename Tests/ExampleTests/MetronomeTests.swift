import Dispatch
import Foundation
import HeartRateProfile
import Locking
import TestSupport
import Testing

/// The heart-rate peripheral's pacing: ticks on the queue, none after a cancel made there, and
/// a schedule that skips what it missed.
@Suite(.timeLimit(.minutes(1))) struct MetronomeTests {
    private static let onQueue = DispatchSpecificKey<Bool>()

    private static func queue(_ label: String) -> DispatchQueue {
        let queue = DispatchQueue(label: label)
        queue.setSpecific(key: onQueue, value: true)
        return queue
    }

    @Test func ticksRunOnTheQueueUntilCancelledThere() async throws {
        let queue = Self.queue("metronome-test")
        let ticks = PosixMutex((count: 0, offQueue: 0, afterCancel: 0))
        let cancelled = PosixMutex(false)
        let metronomeBox = PosixMutex<Metronome?>(nil)
        let metronome = Metronome(interval: .milliseconds(2), queue: queue) {
            ticks.withLock { ticks in
                ticks.count += 1
                if DispatchQueue.getSpecific(key: Self.onQueue) != true { ticks.offQueue += 1 }
                if cancelled.withLock({ $0 }) { ticks.afterCancel += 1 }
            }
            // After the fifth tick a block on the queue cancels (usually while the metronome's
            // thread sleeps towards the sixth): no tick may follow.
            if ticks.withLock({ $0.count }) == 5 {
                queue.async {
                    metronomeBox.withLock { $0?.cancel() }
                    cancelled.withLock { $0 = true }
                }
            }
        }
        metronomeBox.withLock { $0 = metronome }
        metronome.start()
        try await waitUntil("the metronome cancelled itself") { cancelled.withLock { $0 } }
        #expect(metronome.isCancelled)
        // A second metronome on the same queue and interval ticking ten times is time enough
        // for the first to have ticked again, had the cancel not held.
        let probeTicks = PosixMutex(0)
        let probe = Metronome(interval: .milliseconds(2), queue: queue) { probeTicks.withLock { $0 += 1 } }
        probe.start()
        try await waitUntil("the probe ticked ten times") { probeTicks.withLock { $0 } >= 10 }
        probe.cancel()
        let result = ticks.withLock { $0 }
        #expect(result.count == 5)
        #expect(result.offQueue == 0)
        #expect(result.afterCancel == 0)
    }

    @Test func aMetronomeCancelledBeforeItStartsNeverTicks() async throws {
        let queue = Self.queue("metronome-test-cancelled")
        let ticks = PosixMutex(0)
        let metronome = Metronome(interval: .milliseconds(1), queue: queue) { ticks.withLock { $0 += 1 } }
        metronome.cancel()
        metronome.start()
        let probeTicks = PosixMutex(0)
        let probe = Metronome(interval: .milliseconds(1), queue: queue) { probeTicks.withLock { $0 += 1 } }
        probe.start()
        try await waitUntil("the probe ticked ten times") { probeTicks.withLock { $0 } >= 10 }
        probe.cancel()
        #expect(ticks.withLock { $0 } == 0)
    }

    @Test func startingTwiceStartsOneThread() async throws {
        let queue = Self.queue("metronome-test-twice")
        // `queue.sync` runs the handler on the metronome's thread: a second thread would show.
        let threads = PosixMutex((ticks: 0, seen: Set<UInt>()))
        let metronome = Metronome(interval: .milliseconds(2), queue: queue) {
            let thread = UInt(pthread_self())
            threads.withLock {
                $0.ticks += 1
                $0.seen.insert(thread)
            }
        }
        metronome.start()
        metronome.start()
        try await waitUntil("twenty ticks") { threads.withLock { $0.ticks } >= 20 }
        metronome.cancel()
        #expect(threads.withLock { $0.seen.count } == 1)
    }

    @Test func theScheduleKeepsItsStepAndSkipsMissedTicks() {
        // On time: the next point of the schedule.
        #expect(Metronome.deadline(after: 1_000, step: 100, now: 1_050) == 1_100)
        #expect(Metronome.deadline(after: 1_000, step: 100, now: 1_099) == 1_100)
        // Late by 3.5 steps: the ticks at 1,100 … 1,300 are skipped, the schedule is kept.
        #expect(Metronome.deadline(after: 1_000, step: 100, now: 1_350) == 1_400)
        // Exactly on a point that has come: the next one.
        #expect(Metronome.deadline(after: 1_000, step: 100, now: 1_100) == 1_200)
        #expect(Metronome.deadline(after: 1_000, step: 100, now: 1_400) == 1_500)
    }
}
