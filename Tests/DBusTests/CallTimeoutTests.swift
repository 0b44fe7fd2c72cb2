import TestSupport
import Testing

@testable import DBus

/// The timeouts of method calls, which all share one timer per connection
/// (`DBusConnection+Timeouts.swift`): each call times out at its own deadline, never earlier;
/// a call that ended (answered or cancelled) is never timed out later; the timer works again
/// after the connection comes back from a bus restart. See also `MethodCallTests`.
@Suite(.timeLimit(.minutes(1)))
struct CallTimeoutTests {
    typealias Fixture = MethodCallTests.Fixture

    /// Started longest first, so each later call's deadline comes before the one the timer is
    /// armed for; each times out no earlier than its own timeout, the shortest long before the longest.
    @Test func eachCallTimesOutAtItsOwnDeadline() async throws {
        let fixture = try await Fixture()
        // The longest is scaled (TestTime): the two waits before the shortest starts must not
        // bring its deadline near the longest's, even under ThreadSanitizer on a loaded machine.
        let timeouts: [Duration] = [TestTime.scaled(.seconds(3)), .milliseconds(900), .milliseconds(300)]
        let finished = Collected<Int>()
        var tasks: [Task<Duration, any Error>] = []
        for (index, timeout) in timeouts.enumerated() {
            tasks.append(
                Task {
                    let took = try await MethodCallTests.timedOut(fixture, id: UInt32(index), after: timeout)
                    finished.append(index)
                    return took
                })
            try await waitUntil("the server holds call \(index)") { fixture.held.count == index + 1 }
        }
        let shortest = try await tasks[2].value
        #expect(shortest >= timeouts[2] && shortest < timeouts[0], "the 300 ms call took \(shortest)")
        #expect(!finished.values.contains(0), "the longest call ended with the 300 ms one")
        for (index, task) in tasks.enumerated() {
            let took = try await task.value
            #expect(took >= timeouts[index], "call \(index) timed out after \(took), before its \(timeouts[index])")
        }
        #expect(fixture.held.values.allSatisfy { !$0.isAnswered })
    }

    /// A cancelled call's deadline passes while another call waits: nothing fires for it, the
    /// waiting call keeps waiting (its own timeout far away) and gets its reply.
    @Test func aCancelledCallIsNeverTimedOutLater() async throws {
        let fixture = try await Fixture()
        // Long enough (scaled, TestTime) for the cancellation to come first, even under load.
        let short = TestTime.scaled(.seconds(1))
        let cancelled = Task { () async throws(DBusError) -> [DBusValue] in
            try await fixture.call("Hold", [.uint32(1)], timeout: short)
        }
        try await waitUntil("the server holds the first call") { fixture.held.count == 1 }
        cancelled.cancel()
        let error = await #expect(throws: DBusError.self) { try await cancelled.value }
        #expect(error?.code == .cancelled)

        let waiting = Task { try await fixture.call("Hold", [.uint32(2)], timeout: .seconds(30)) }
        try await waitUntil("the server holds the waiting call") { fixture.held.count == 2 }
        // An answered call with a short timeout, too.
        #expect(try await fixture.call("Add", [.int32(1), .int32(2)], timeout: short) == [.int32(3)])
        // This one's deadline comes after both: by then the timer has fired at theirs.
        let took = try await MethodCallTests.timedOut(fixture, id: 3, after: short + .milliseconds(400))
        #expect(took >= short + .milliseconds(400))
        fixture.held.values[1].reply([.string("still here")])
        #expect(try await waiting.value == [.string("still here")])
    }

    /// Calls made on the connection a restarted bus gave back still time out.
    @Test func callsTimeOutAfterTheConnectionCameBack() async throws {
        let bus = try TestBus()
        let connection = try await DBusConnection.open(
            address: bus.daemon.address, label: "reconnecting", reconnect: ReconnectTests.quickly)
        defer { connection.close() }
        let lost = Collected<Bool>()
        connection.onLifecycleEvent { event in
            if case .lost = event { lost.append(true) }
        }
        try bus.daemon.restart()
        try await waitUntil("the connection is back") { lost.count == 1 && connection.isOpen }
        let server = try await bus.connect("server")
        defer { server.close() }
        let held = Collected<DBusMethodInvocation>()
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Hold") { held.append($0) }])], at: path("/hold"))
        let start = ContinuousClock.now
        let error = await #expect(throws: DBusError.self) {
            try await connection.call(
                destination: server.uniqueName, path: path("/hold"), interface: testInterface, member: "Hold",
                timeout: .milliseconds(300))
        }
        #expect(error?.code == .timeout)
        #expect(ContinuousClock.now - start >= .milliseconds(300))
        #expect(held.count == 1)
    }

    /// The waiting calls are kept in an array (with their serials beside) and a call that ends
    /// leaves its place to the last one: answering the first of four held calls moves the last;
    /// the short one in the middle still times out at its deadline, and the moved one is still
    /// answered (its reply found by serial in its new place).
    @Test func answeringACallKeepsTheOthersWaiting() async throws {
        let fixture = try await Fixture()
        let long = Duration.seconds(30)
        let short = TestTime.scaled(.milliseconds(1500))
        var tasks: [Task<[DBusValue], any Error>] = []
        for (index, timeout) in [long, long, short, long].enumerated() {
            tasks.append(Task { try await fixture.call("Hold", [.uint32(UInt32(index))], timeout: timeout) })
            try await waitUntil("the server holds call \(index)") { fixture.held.count == index + 1 }
        }
        let held = fixture.held.values
        func id(_ invocation: DBusMethodInvocation) -> UInt32? { (try? invocation.arguments())?.first?.uint32Value }
        let byID = Dictionary(uniqueKeysWithValues: held.map { (id($0) ?? .max, $0) })
        #expect(Self.waitingCalls(of: fixture.client) == .consistent(count: 4))
        byID[0]?.reply([.string("first")])
        #expect(try await tasks[0].value == [.string("first")])
        // The last call now sits in the first's place, and knows it. On a loaded machine the short
        // call may already have timed out (its own removal moved the last call first): either
        // way every call left finds itself at its slot.
        let afterFirst = Self.waitingCalls(of: fixture.client)
        #expect(afterFirst == .consistent(count: 3) || afterFirst == .consistent(count: 2), "\(afterFirst)")
        let error = await #expect(throws: DBusError.self) { try await tasks[2].value }
        #expect(error?.code == .timeout)
        byID[3]?.reply([.string("moved")])
        #expect(try await tasks[3].value == [.string("moved")])
        byID[1]?.reply([.string("second")])
        #expect(try await tasks[1].value == [.string("second")])
        #expect(Self.waitingCalls(of: fixture.client) == .consistent(count: 0))
    }

    enum TableState: Equatable {
        case consistent(count: Int)
        /// Some call's slot, or the serial beside it, is not its own.
        case inconsistent
    }

    /// The connection's waiting calls, read on its queue: how many, and whether each finds itself
    /// at its slot with its serial beside it.
    static func waitingCalls(of connection: DBusConnection) -> TableState {
        connection.onQueue {
            let calls = connection.pendingCalls
            guard calls.count == connection.pendingSerials.count else { return .inconsistent }
            let found = calls.indices.allSatisfy {
                calls[$0].slot == $0 && connection.pendingSerials[$0] == calls[$0].serial
            }
            return found ? .consistent(count: calls.count) : .inconsistent
        }
    }

    /// A call's deadline: its timeout after the moment it was sent, to the nanosecond; at least a
    /// millisecond on (libdbus took whole milliseconds, never 0); never (`UInt64.max`) for a
    /// timeout past the clock's range.
    @Test(arguments: [
        (Duration.zero, UInt64(1_000_000)), (.seconds(-5), 1_000_000), (.nanoseconds(1), 1_000_000),
        (.microseconds(1500), 1_500_000), (.milliseconds(250), 250_000_000), (.seconds(25), 25_000_000_000),
        (.seconds(Int64.max), UInt64.max), (.milliseconds(Int64.max), UInt64.max),
        (.seconds(1e9), 1_000_000_000_000_000_000),
    ])
    func callDeadlinesAreInNanoseconds(_ timeout: Duration, _ expectedAfter: UInt64) {
        let now: UInt64 = 5_000_000_000
        let deadline = DBusConnection.callDeadline(after: timeout, now: now)
        #expect(deadline == (expectedAfter == .max ? .max : now + expectedAfter))
    }

    /// Near the end of the clock's range, a long timeout saturates instead of wrapping around.
    @Test func aDeadlinePastTheClocksRangeIsNever() {
        let now = UInt64.max - 10_000_000_000
        #expect(DBusConnection.callDeadline(after: .seconds(5), now: now) == now + 5_000_000_000)
        #expect(DBusConnection.callDeadline(after: .seconds(11), now: now) == .max)
    }
}
