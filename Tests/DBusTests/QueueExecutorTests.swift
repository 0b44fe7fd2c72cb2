import Dispatch
import Testing

@testable import DBus

/// A task that prefers a connection's executor runs on the connection's queue, before and after
/// its suspension points: the engines rely on it to touch queue-confined state after an `await`.
@Suite(.timeLimit(.minutes(5))) struct QueueExecutorTests {
    static func onQueue(of connection: DBusConnection) -> Bool {
        DispatchQueue.getSpecific(key: DBusConnection.queueKey) == ObjectIdentifier(connection)
    }

    @Test func aTaskOnTheExecutorRunsOnTheQueueAcrossCallsAndResumptions() async throws {
        let bus = try TestBus()
        let connection = try await bus.connect()
        let places = await Task(executorPreference: connection.executor) { () -> [Bool] in
            var places = [Self.onQueue(of: connection)]
            // A method call to the bus: its reply is handled on the queue, and the task goes on there.
            let id = try? await connection.call(
                destination: .bus, path: DBusConnection.busPath, interface: .bus, member: "GetId")
            places.append(id?.first?.stringValue?.isEmpty == false)
            places.append(Self.onQueue(of: connection))
            // A continuation resumed from another thread.
            await withCheckedContinuation { continuation in DispatchQueue.global().async { continuation.resume() } }
            places.append(Self.onQueue(of: connection))
            // Blocking helpers that run their body on the queue do not deadlock here.
            places.append(connection.onQueue { Self.onQueue(of: connection) })
            return places
        }.value
        #expect(places == [true, true, true, true, true])
        // Without the preference the same code runs off the queue.
        #expect(await Task { Self.onQueue(of: connection) }.value == false)
    }
}
