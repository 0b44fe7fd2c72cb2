import Dispatch
import Synchronization
import TestSupport
import Testing

@testable import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// Work a handler hands to the connection's reading thread (``WorkAfterEvent``): where and when
/// it runs, and that the connection goes on reading while it waits (the second thread of
/// ``DedicatedReaderPair``) — what lets a central run its delegate on the reading thread with
/// one wake-up per value, however long the app keeps its queue.
@Suite(.timeLimit(.minutes(2))) struct WorkAfterEventTests {
    /// What a handler and its work saw.
    final class Trace: Sendable {
        let steps = Collected<String>()
        let threads = Collected<pthread_t>()
    }

    static func emit(_ emitter: DBusConnection, _ index: UInt32) throws {
        emitter.emit(path: try path("/w"), interface: testInterface, member: "Tick", arguments: [.uint32(index)])
    }

    @Test func theWorkRunsOnTheReadingThreadAfterTheHandlerOutsideTheQueue() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let trace = Trace()
        let taken = Collected<Bool>()
        let subscription = try await listener.subscribe(
            DBusMatchRule(sender: emitter.uniqueName, interface: testInterface, member: "Tick")
        ) { _ in
            trace.threads.append(pthread_self())
            taken.append(
                WorkAfterEvent.enqueue {
                    trace.threads.append(pthread_self())
                    trace.steps.append(listener.isOnQueue ? "work on the queue" : "work off the queue")
                    // Off the queue: a sync onto it returns (on it, this would never return).
                    listener.queue.sync { trace.steps.append("queue free") }
                })
            trace.steps.append("handler")
        }
        try Self.emit(emitter, 1)
        try await waitUntil("the work ran") { trace.steps.count == 3 }
        #expect(taken.values == [true])
        #expect(trace.steps.values == ["handler", "work off the queue", "queue free"])
        let threads = trace.threads.values
        #expect(threads.count == 2 && pthread_equal(threads[0], threads[1]) != 0)
        subscription.cancel()
    }

    @Test func noWorkIsTakenAwayFromAReadingThreadsHandler() async throws {
        let bus = try TestBus()
        let connection = try await bus.connect()
        #expect(!WorkAfterEvent.enqueue {})
        // On the connection's queue, but not in a reading thread's handler.
        let onQueue = await withCheckedContinuation { continuation in
            connection.queue.async { continuation.resume(returning: WorkAfterEvent.enqueue {}) }
        }
        #expect(!onQueue)
    }

    @Test func theConnectionGoesOnReadingWhileAWorkWaits() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        try await emitter.exportEcho()
        let received = Collected<UInt32>()
        let release = DispatchSemaphore(value: 0)
        let waiting = Atomic<Bool>(false)
        let subscription = try await listener.subscribe(
            DBusMatchRule(sender: emitter.uniqueName, interface: testInterface, member: "Tick")
        ) { message in
            guard let index = (try? message.arguments())?.first?.uint32Value else { return }
            received.append(index)
            if index == 0 {
                _ = WorkAfterEvent.enqueue {
                    waiting.store(true, ordering: .releasing)
                    release.wait()  // the app's queue, kept busy
                    waiting.store(false, ordering: .releasing)
                }
            }
        }
        try Self.emit(emitter, 0)
        try await waitUntil("the first work waits") { waiting.load(ordering: .acquiring) }
        // While one reading thread waits in the work, signals and replies are still read.
        for index in 1...5 { try Self.emit(emitter, UInt32(index)) }
        try await waitUntil("the signals sent meanwhile were handled") { received.count == 6 }
        let echoed = try await listener.echo([.string("still reading")], via: emitter)
        #expect(echoed == [.string("still reading")])
        let stillWaiting = waiting.load(ordering: .acquiring)
        #expect(stillWaiting)
        release.signal()
        try await waitUntil("the work ended") { !waiting.load(ordering: .acquiring) }
        #expect(received.values == [0, 1, 2, 3, 4, 5])
        subscription.cancel()
    }
}
