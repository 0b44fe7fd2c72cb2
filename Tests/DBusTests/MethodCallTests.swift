import TestSupport
import Testing

@testable import DBus

/// Method calls from one connection to another through the bus: replies,
/// error replies, timeouts, cancellation, and many calls in flight at once.
@Suite(.timeLimit(.minutes(5))) struct MethodCallTests {
    /// A server exporting `/calc` with methods that answer, fail, or hold their invocation.
    struct Fixture {
        let bus: TestBus
        let server: DBusConnection
        let client: DBusConnection
        /// Invocations of `Hold`, kept alive and unanswered.
        let held = Collected<DBusMethodInvocation>()

        init() async throws {
            bus = try TestBus()
            server = try await bus.connect("server")
            client = try await bus.connect("client")
            let held = self.held
            let methods = [
                DBusMethod("Add", in: "ii", out: "i") { invocation in
                    let args = (try? invocation.arguments()) ?? []
                    invocation.reply([.int32((args[0].int32Value ?? 0) &+ (args[1].int32Value ?? 0))])
                },
                DBusMethod("FailBlueZ", in: "s") { invocation in
                    let text = (try? invocation.arguments())?.first?.stringValue ?? ""
                    invocation.reply(error: DBusError(name: "org.bluez.Error.Failed", message: text))
                },
                DBusMethod("FailInvalidName") { invocation in
                    invocation.reply(error: DBusError(name: "not an error name", message: "oops"))
                },
                DBusMethod("Hold", in: "u") { invocation in held.append(invocation) },
            ]
            try await server.export([DBusInterface(testInterface, methods: methods)], at: path("/calc"))
        }

        func call(_ member: MemberName, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(10))
            async throws(DBusError) -> [DBusValue]
        {
            try await client.call(
                destination: server.uniqueName, path: ObjectPath(trusted: "/calc"), interface: testInterface,
                member: member, arguments: arguments, timeout: timeout)
        }
    }

    @Test func callGetsItsReply() async throws {
        let fixture = try await Fixture()
        #expect(try await fixture.call("Add", [.int32(40), .int32(2)]) == [.int32(42)])
        // The full message carries the header fields of a reply.
        let message = try DBusMessage.methodCall(
            destination: fixture.server.uniqueName, path: path("/calc"), interface: testInterface, member: "Add",
            arguments: [.int32(1), .int32(1)])
        let reply = try await fixture.client.call(message)
        #expect(reply.kind == .methodReturn)
        #expect(reply.sender == fixture.server.uniqueName)
        #expect(reply.replySerial == message.serial)
        #expect(reply.signature == "i")
    }

    @Test func errorRepliesKeepNameAndMessage() async throws {
        let fixture = try await Fixture()
        let error = await #expect(throws: DBusError.self) { try await fixture.call("FailBlueZ", [.string("busy now")]) }
        #expect(error?.code == .other("org.bluez.Error.Failed"))
        #expect(error?.name == "org.bluez.Error.Failed")
        #expect(error?.message == "busy now")
    }

    @Test func invalidErrorNamesBecomeFailed() async throws {
        let fixture = try await Fixture()
        let error = await #expect(throws: DBusError.self) { try await fixture.call("FailInvalidName") }
        #expect(error?.code == .failed)
        #expect(error?.message == "oops")
    }

    @Test func unknownMethodMapsToItsCode() async throws {
        let fixture = try await Fixture()
        let error = await #expect(throws: DBusError.self) { try await fixture.call("Subtract", [.int32(1)]) }
        #expect(error?.code == .unknownMethod)
        #expect(error?.name == "org.freedesktop.DBus.Error.UnknownMethod")
    }

    @Test func callWithoutAnswerTimesOut() async throws {
        let fixture = try await Fixture()
        let error = await #expect(throws: DBusError.self) {
            try await fixture.call("Hold", [.uint32(1)], timeout: .milliseconds(200))
        }
        #expect(error?.code == .timeout)
        // The handler really got the call and still holds it: the timeout was ours.
        try await waitUntil("the server got the call") { fixture.held.count == 1 }
        #expect(fixture.held.values.first?.isAnswered == false)
        // A late answer is dropped without harm, and the connection still works.
        fixture.held.values.first?.reply()
        #expect(try await fixture.call("Add", [.int32(1), .int32(2)]) == [.int32(3)])
    }

    /// All of a connection's timeouts share one timer: a shorter timeout added after a longer one
    /// still fires on time, the longer one after it, and one answered in time never fires.
    @Test func timeoutsOfCallsInFlightFireInDeadlineOrder() async throws {
        let fixture = try await Fixture()
        // The long one far from the short one, so that a loaded machine (ThreadSanitizer beside
        // the whole tier: 1.57 s once against a bound of 1.5 s with a 3 s long call) never
        // brings the two figures together.
        let long = Task { try await Self.timedOut(fixture, id: 1, after: .seconds(8)) }
        try await waitUntil("the server got the long call") { fixture.held.count == 1 }
        let answered = Task { try await fixture.call("Hold", [.uint32(2)], timeout: .seconds(20)) }
        try await waitUntil("the server got the answered call") { fixture.held.count == 2 }
        // Had the timer stayed armed for the long call only, this would take about 8 s.
        let short = try await Self.timedOut(fixture, id: 3, after: .milliseconds(200))
        #expect(short < .seconds(4))
        fixture.held.values[1].reply()
        let reply = try await answered.value
        #expect(reply == [])
        let longTook = try await long.value
        #expect(longTook >= .seconds(8))
    }

    /// Calls `Hold` with `timeout`; returns how long it took to time out.
    static func timedOut(_ fixture: Fixture, id: UInt32, after timeout: Duration) async throws -> Duration {
        let start = ContinuousClock.now
        let result: Result<[DBusValue], any Error>
        do {
            result = .success(try await fixture.call("Hold", [.uint32(id)], timeout: timeout))
        } catch {
            result = .failure(error)
        }
        guard case .failure(let error) = result, (error as? DBusError)?.code == .timeout else {
            throw DBusError(.failed, "call \(id) did not time out: \(result)")
        }
        return ContinuousClock.now - start
    }

    @Test func extremeTimeoutsNeitherTrapNorMisbehave() async throws {
        let fixture = try await Fixture()
        // Huge means "no timeout"; the reply still arrives.
        for timeout: Duration in [.seconds(Int64.max), .seconds(1e15), .milliseconds(Int64.max)] {
            #expect(try await fixture.call("Add", [.int32(1), .int32(2)], timeout: timeout) == [.int32(3)])
        }
        // Zero and negative become the shortest timeout there is.
        for timeout: Duration in [.zero, .seconds(-5)] {
            let error = await #expect(throws: DBusError.self) {
                try await fixture.call("Hold", [.uint32(9)], timeout: timeout)
            }
            #expect(error?.code == .timeout)
        }
    }

    @Test func cancellingTheTaskCancelsTheCall() async throws {
        let fixture = try await Fixture()
        let task = Task { () async throws(DBusError) -> [DBusValue] in try await fixture.call("Hold", [.uint32(7)]) }
        try await waitUntil("the server holds the call") { fixture.held.count == 1 }
        task.cancel()
        let error = await #expect(throws: DBusError.self) { try await task.value }
        #expect(error?.code == .cancelled)
        // The server can answer the cancelled call and later calls.
        fixture.held.values.first?.reply()
        #expect(try await fixture.call("Add", [.int32(2), .int32(2)]) == [.int32(4)])
        let second = Task { () async throws(DBusError) -> [DBusValue] in try await fixture.call("Hold", [.uint32(8)]) }
        try await waitUntil("the server holds the second call") { fixture.held.count == 2 }
        fixture.held.values[1].reply()
        #expect(try await second.value == [])
    }

    @Test func callFromAnAlreadyCancelledTaskIsCancelled() async throws {
        let fixture = try await Fixture()
        let task = Task { () async throws(DBusError) -> [DBusValue] in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await fixture.call("Add", [.int32(1), .int32(1)])
        }
        let error = await #expect(throws: DBusError.self) { try await task.value }
        #expect(error?.code == .cancelled)
    }

    @Test func callingANameNobodyOwnsIsServiceUnknown() async throws {
        let fixture = try await Fixture()
        let error = await #expect(throws: DBusError.self) {
            try await fixture.client.call(
                destination: "com.example.Nobody", path: path("/"), interface: testInterface, member: "Ping")
        }
        #expect(error?.code == .serviceUnknown)
    }

    @Test func callingAUniqueNameThatLeftIsServiceUnknown() async throws {
        let fixture = try await Fixture()
        let leaving = try await fixture.bus.connect("leaving")
        let name = try #require(leaving.uniqueName)
        leaving.close()
        try await waitUntil("the bus forgot \(name)") {
            do {
                _ = try await fixture.client.call(
                    destination: .bus, path: path("/org/freedesktop/DBus"), interface: .bus, member: "GetNameOwner",
                    arguments: [.string(name.rawValue)])
                return false
            } catch { return (error as? DBusError)?.code == .nameHasNoOwner }
        }
        let error = await #expect(throws: DBusError.self) {
            try await fixture.client.call(destination: name, path: path("/"), interface: testInterface, member: "Ping")
        }
        #expect(error?.code == .serviceUnknown)
    }

    @Test func aThousandCallsInFlightAtOnce() async throws {
        let fixture = try await Fixture()
        let count = 1000
        let results = try await withThrowingTaskGroup(of: (UInt32, [DBusValue]).self) { group in
            for i in 0..<count {
                group.addTask {
                    (UInt32(i), try await fixture.call("Hold", [.uint32(UInt32(i))], timeout: .seconds(20)))
                }
            }
            // Every call reaches the server before any is answered: all are in flight at once.
            try await waitUntil("the server holds every call", timeout: .seconds(20)) { fixture.held.count == count }
            for invocation in fixture.held.values {
                let argument = (try? invocation.arguments())?.first?.uint32Value ?? .max
                invocation.reply([.uint32(argument &* 3)])
            }
            var results: [UInt32: [DBusValue]] = [:]
            for try await (i, reply) in group { results[i] = reply }
            return results
        }
        #expect(results.count == count)
        for i in 0..<UInt32(count) { #expect(results[i] == [.uint32(i * 3)], "call \(i)") }
    }

    @Test func callsAreServedWhileOurOwnCallIsPending() async throws {
        // Both directions at once: the client calls the server while the
        // server's call to the client is pending (no queue is ever blocked).
        let fixture = try await Fixture()
        try await fixture.client.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Ping", out: "s") { $0.reply([.string("pong")]) }])],
            at: path("/client"))
        let pending = Task { try await fixture.call("Hold", [.uint32(1)]) }
        try await waitUntil("the server holds the call") { fixture.held.count == 1 }
        let back = try await fixture.server.call(
            destination: fixture.client.uniqueName, path: path("/client"), interface: testInterface, member: "Ping")
        #expect(back == [.string("pong")])
        fixture.held.values[0].reply([.string("done")])
        #expect(try await pending.value == [.string("done")])
    }

    /// Calls from every kind of thread: a task on the global executor (sends from its own thread),
    /// one on the connection's executor (sends at once), and ones on another connection's executor
    /// calling across both ways at the same time (hand the send to the queue: waiting for it there
    /// could deadlock the two queues).
    @Test(.timeLimit(.minutes(1))) func callsFromAnyExecutorCrossingConnectionsComplete() async throws {
        let bus = try TestBus()
        let first = try await bus.connect("first")
        let second = try await bus.connect("second")
        try await first.exportEcho()
        try await second.exportEcho()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                let value = DBusValue.int32(Int32(index))
                let (caller, target) = index.isMultiple(of: 2) ? (first, second) : (second, first)
                let check: @Sendable () async throws -> Void = {
                    let reply = try await caller.echo([value], via: target)
                    #expect(reply == [value])
                }
                group.addTask(executorPreference: target.executor, operation: check)
                group.addTask(executorPreference: caller.executor, operation: check)
                group.addTask(operation: check)
            }
            try await group.waitForAll()
        }
    }
}
