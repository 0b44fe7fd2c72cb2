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

    /// The table keeps each timeout's index in libdbus's data and fills a hole with its last
    /// entry: answering the first of four held calls moves the last one's timeout; the short one
    /// in the middle still times out at its deadline, and the moved one is still answered.
    @Test func answeringACallKeepsTheOthersTimeouts() async throws {
        let fixture = try await Fixture()
        let long = Duration.seconds(30)
        let short = TestTime.scaled(.milliseconds(600))
        var tasks: [Task<[DBusValue], any Error>] = []
        for (index, timeout) in [long, long, short, long].enumerated() {
            tasks.append(Task { try await fixture.call("Hold", [.uint32(UInt32(index))], timeout: timeout) })
            try await waitUntil("the server holds call \(index)") { fixture.held.count == index + 1 }
        }
        let held = fixture.held.values
        func id(_ invocation: DBusMethodInvocation) -> UInt32? { (try? invocation.arguments())?.first?.uint32Value }
        let byID = Dictionary(uniqueKeysWithValues: held.map { (id($0) ?? .max, $0) })
        #expect(Self.timeoutTable(of: fixture.client) == .consistent(count: 4))
        byID[0]?.reply([.string("first")])
        #expect(try await tasks[0].value == [.string("first")])
        // The last timeout now sits in the first's slot, and finds itself there.
        #expect(Self.timeoutTable(of: fixture.client) == .consistent(count: 3))
        let error = await #expect(throws: DBusError.self) { try await tasks[2].value }
        #expect(error?.code == .timeout)
        byID[3]?.reply([.string("moved")])
        #expect(try await tasks[3].value == [.string("moved")])
        byID[1]?.reply([.string("second")])
        #expect(try await tasks[1].value == [.string("second")])
        // Every removal found its entry: none is left behind for a freed timeout.
        #expect(Self.timeoutTable(of: fixture.client) == .consistent(count: 0))
    }

    enum TableState: Equatable {
        case consistent(count: Int)
        /// Some entry's index, as its libdbus timeout keeps it, points elsewhere.
        case inconsistent
    }

    /// The connection's timeout table, read on its queue: how many entries, and whether each
    /// finds itself through the index its timeout keeps.
    static func timeoutTable(of connection: DBusConnection) -> TableState {
        connection.onQueue {
            let table = connection.timeouts
            let found = table.entries.indices.allSatisfy { table.index(of: table.entries[$0].timeout) == $0 }
            return found ? .consistent(count: table.entries.count) : .inconsistent
        }
    }

    /// libdbus takes whole milliseconds: rounded up, never 0 (which it would not accept), and
    /// `Int32.max` ("no timeout") for anything at least that long.
    @Test(arguments: [
        (Duration.zero, Int32(1)), (.seconds(-5), 1), (.nanoseconds(1), 1), (.microseconds(1500), 2),
        (.milliseconds(250), 250), (.seconds(25), 25_000), (.seconds(2_147_483), 2_147_483_000),
        (.milliseconds(2_147_483_648), Int32.max),
        (.seconds(Int64.max), Int32.max), (.milliseconds(Int64.max), Int32.max), (.seconds(1e15), Int32.max),
    ])
    func timeoutsBecomeLibdbusMilliseconds(_ timeout: Duration, _ expected: Int32) {
        #expect(DBusConnection.libdbusMilliseconds(timeout) == expected)
    }
}
