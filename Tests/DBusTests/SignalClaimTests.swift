import TestSupport
import Testing

@testable import DBus

/// Claims (`DBusConnection.claimSignals(_:handler:)`): a per-path handler that takes a signal
/// before the subscriptions whose rules name no path, with no match rule on the bus. The
/// notification routes of a central rest on them.
@Suite(.timeLimit(.minutes(5))) struct SignalClaimTests {
    static let interface: InterfaceName = "com.example.Claimed"

    /// A listener with a broad subscription (a path namespace) that collects the index of each
    /// signal it gets, and an emitter.
    static func setUp() async throws -> (
        TestBus, DBusConnection, DBusConnection, Collected<UInt32>, DBusSubscription
    ) {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let broad = Collected<UInt32>()
        let subscription = try await listener.subscribe(
            DBusMatchRule(sender: emitter.uniqueName, pathNamespace: try path("/ns"), interface: interface)
        ) { message in
            if let index = SignalTests.index(message) { broad.append(index) }
        }
        return (bus, listener, emitter, broad, subscription)
    }

    static func emit(_ emitter: DBusConnection, _ signalPath: String, _ index: UInt32) throws {
        emitter.emit(path: try path(signalPath), interface: interface, member: "Tick", arguments: [.uint32(index)])
    }

    /// Waits until the broad subscription saw `index` (signals of one sender arrive in order).
    static func sentinel(_ emitter: DBusConnection, _ broad: Collected<UInt32>, _ index: UInt32) async throws {
        try emit(emitter, "/ns/sentinel", index)
        try await waitUntil("the sentinel \(index)") { broad.values.contains(index) }
    }

    @Test func aClaimTakesItsPathsSignalsAndLeavesTheRestToTheBroadSubscription() async throws {
        let (bus, listener, emitter, broad, subscription) = try await Self.setUp()
        defer { withExtendedLifetime((bus, subscription)) {} }
        let rulesBefore = listener.matchRuleCount
        let claimed = Collected<UInt32>()
        let claim = try listener.queue.sync {
            try listener.claimSignals(
                DBusMatchRule(sender: emitter.uniqueName, path: try path("/ns/a"), interface: Self.interface)
            ) { message in
                guard let index = SignalTests.index(message) else { return false }
                claimed.append(index)
                return index % 2 == 0  // odd ones it leaves to the broad subscription
            }
        }
        // No match rule was added, on the connection or the bus.
        #expect(listener.matchRuleCount == rulesBefore)
        #expect(listener.claimCount == 1)
        try Self.emit(emitter, "/ns/a", 0)
        try Self.emit(emitter, "/ns/a", 1)
        try Self.emit(emitter, "/ns/b", 2)
        try Self.emit(emitter, "/ns/a/child", 4)
        try await Self.sentinel(emitter, broad, 100)
        #expect(claimed.values == [0, 1])
        #expect(broad.values == [1, 2, 4, 100])

        // Cancelled: its handler runs no more, and the broad subscription gets everything again.
        claim.cancel()
        try Self.emit(emitter, "/ns/a", 6)
        try await Self.sentinel(emitter, broad, 101)
        #expect(claimed.values == [0, 1])
        #expect(broad.values == [1, 2, 4, 100, 6, 101])
        try await waitUntil("the claim removed") { listener.claimCount == 0 }
    }

    @Test func aClaimMatchesItsWholeRuleAndNeedsAPath() async throws {
        let (bus, listener, emitter, broad, subscription) = try await Self.setUp()
        defer { withExtendedLifetime((bus, subscription)) {} }
        let claimed = Collected<UInt32>()
        // Another sender's signals at the path are not the claim's.
        let claim = try listener.queue.sync {
            try listener.claimSignals(DBusMatchRule(sender: listener.uniqueName, path: try path("/ns/a"))) { _ in
                claimed.append(0)
                return true
            }
        }
        try Self.emit(emitter, "/ns/a", 1)
        try await Self.sentinel(emitter, broad, 100)
        #expect(claimed.values.isEmpty)
        #expect(broad.values == [1, 100])
        claim.cancel()
        // A rule without a path cannot be a claim.
        #expect(throws: DBusError.self) {
            try listener.queue.sync {
                try listener.claimSignals(DBusMatchRule(interface: Self.interface)) { _ in true }
            }
        }
    }

    @Test func releasingAClaimEndsIt() async throws {
        let (bus, listener, emitter, broad, subscription) = try await Self.setUp()
        defer { withExtendedLifetime((bus, subscription)) {} }
        let claimed = Collected<UInt32>()
        _ = try listener.queue.sync {
            try listener.claimSignals(DBusMatchRule(path: try path("/ns/a"))) { _ in
                claimed.append(0)
                return true
            }
        }
        try Self.emit(emitter, "/ns/a", 1)
        try await Self.sentinel(emitter, broad, 100)
        #expect(claimed.values.isEmpty)
        #expect(broad.values == [1, 100])
        try await waitUntil("the claim removed") { listener.claimCount == 0 }
    }
}
