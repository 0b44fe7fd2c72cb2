import TestSupport
import Testing

@testable import DBus

/// Signal subscriptions: local filtering, cancellation, reference-counted match
/// rules, senders given as well-known names, unicast signals.
///
/// Non-delivery is proven with a sentinel: signals from one sender arrive in
/// the order it sent them, so once a sentinel sent last has arrived, every
/// earlier signal from that sender has been routed.
@Suite(.timeLimit(.minutes(5))) struct SignalTests {
    static let sentinelInterface: InterfaceName = "com.example.Sentinel"

    /// The index each test signal carries as its last argument.
    static func index(_ message: DBusMessage) -> UInt32? {
        (try? message.arguments())?.last?.uint32Value
    }

    /// Subscribes to `Done` signals from `sender` and returns their count box.
    static func sentinel(on listener: DBusConnection, from sender: DBusConnection) async throws
        -> (Collected<DBusMessage>, DBusSubscription)
    {
        let done = Collected<DBusMessage>()
        let subscription = try await listener.subscribe(
            DBusMatchRule(sender: sender.uniqueName, interface: sentinelInterface, member: "Done")
        ) { done.append($0) }
        return (done, subscription)
    }

    static func sendSentinel(from emitter: DBusConnection, to listener: DBusConnection? = nil) throws {
        emitter.emit(
            path: try path("/done"), interface: sentinelInterface, member: "Done", arguments: [],
            destination: listener?.uniqueName)
    }

    @Test func handlersGetOnlyTheSignalsTheirRuleMatches() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let other: InterfaceName = "com.example.Other"
        let rules: [(String, DBusMatchRule)] = [
            ("path", DBusMatchRule(path: try path("/a"))),
            ("interface", DBusMatchRule(interface: other)),
            ("member", DBusMatchRule(member: "Two")),
            ("arg0", DBusMatchRule(arg0: "x")),
            ("namespace", DBusMatchRule(pathNamespace: try path("/ns"))),
            ("sender", DBusMatchRule(sender: emitter.uniqueName)),
            ("all", DBusMatchRule(path: try path("/a"), interface: testInterface, member: "One", arg0: "x")),
        ]
        var boxes: [String: Collected<UInt32>] = [:]
        var subscriptions: [DBusSubscription] = []
        for (label, rule) in rules {
            let box = Collected<UInt32>()
            boxes[label] = box
            subscriptions.append(
                try await listener.subscribe(rule) { message in
                    if let index = Self.index(message) { box.append(index) }
                })
        }
        let (done, sentinel) = try await Self.sentinel(on: listener, from: emitter)
        let signals: [(String, InterfaceName, MemberName, [DBusValue])] = [
            ("/a", testInterface, "One", [.string("x")]),
            ("/b", testInterface, "One", [.string("y")]),
            ("/a/child", testInterface, "Two", [.string("x")]),
            ("/ns", other, "One", [.string("z")]),
            ("/ns/deep/er", testInterface, "Two", [.string("y")]),
            ("/nsx", testInterface, "One", [.string("x")]),
            ("/a", other, "Two", [.string("y")]),
            ("/a", testInterface, "One", []),
        ]
        for (index, (signalPath, interface, member, arguments)) in signals.enumerated() {
            emitter.emit(
                path: try path(signalPath), interface: interface, member: member,
                arguments: arguments + [.uint32(UInt32(index))])
        }
        try Self.sendSentinel(from: emitter)
        try await waitUntil("the sentinel arrived") { done.count == 1 }
        #expect(boxes["path"]?.values == [0, 6, 7])
        #expect(boxes["interface"]?.values == [3, 6])
        #expect(boxes["member"]?.values == [2, 4, 6])
        #expect(boxes["arg0"]?.values == [0, 2, 5])
        #expect(boxes["namespace"]?.values == [3, 4])
        #expect(boxes["sender"]?.values == Array(0..<8))
        #expect(boxes["all"]?.values == [0])
        withExtendedLifetime((subscriptions, sentinel)) {}
    }

    @Test func signalsArriveInTheOrderTheyWereSent() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let got = Collected<UInt32>()
        let subscription = try await listener.subscribe(DBusMatchRule(interface: testInterface, member: "Tick")) {
            if let index = Self.index($0) { got.append(index) }
        }
        for i in 0..<200 {
            emitter.emit(
                path: try path("/t"), interface: testInterface, member: "Tick", arguments: [.uint32(UInt32(i))])
        }
        try await waitUntil("200 signals arrived") { got.count == 200 }
        #expect(got.values == Array(0..<200))
        subscription.cancel()
    }

    @Test func nothingIsDeliveredAfterCancel() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let got = Collected<UInt32>()
        let subscription = try await listener.subscribe(DBusMatchRule(path: try path("/c"), member: "Tick")) {
            if let index = Self.index($0) { got.append(index) }
        }
        let (done, sentinel) = try await Self.sentinel(on: listener, from: emitter)
        #expect(listener.matchRuleCount == 2)
        emitter.emit(path: try path("/c"), interface: testInterface, member: "Tick", arguments: [.uint32(1)])
        try await waitUntil("the first tick arrived") { got.count == 1 }
        subscription.cancel()
        subscription.cancel()  // idempotent
        emitter.emit(path: try path("/c"), interface: testInterface, member: "Tick", arguments: [.uint32(2)])
        try Self.sendSentinel(from: emitter)
        try await waitUntil("the sentinel arrived") { done.count == 1 }
        #expect(got.values == [1])
        // The rule is gone here and on the bus (RemoveMatch went out before this call).
        #expect(listener.matchRuleCount == 1)
        #expect(try await listener.busMatchRuleCount() == 1)
        sentinel.cancel()
    }

    @Test func releasingASubscriptionCancelsIt() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let got = Collected<UInt32>()
        var subscription: DBusSubscription? = try await listener.subscribe(DBusMatchRule(member: "Tick")) {
            if let index = Self.index($0) { got.append(index) }
        }
        #expect(subscription != nil)
        subscription = nil
        let (done, sentinel) = try await Self.sentinel(on: listener, from: emitter)
        emitter.emit(path: try path("/r"), interface: testInterface, member: "Tick", arguments: [.uint32(1)])
        try Self.sendSentinel(from: emitter)
        try await waitUntil("the sentinel arrived") { done.count == 1 }
        #expect(got.values.isEmpty)
        #expect(listener.matchRuleCount == 1)
        #expect(try await listener.busMatchRuleCount() == 1)
        sentinel.cancel()
    }

    @Test func identicalRulesShareOneMatchRule() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let rule = DBusMatchRule(path: try path("/shared"), interface: testInterface, member: "Tick")
        let first = Collected<UInt32>()
        let second = Collected<UInt32>()
        let a = try await listener.subscribe(rule) { if let i = Self.index($0) { first.append(i) } }
        let b = try await listener.subscribe(rule) { if let i = Self.index($0) { second.append(i) } }
        #expect(listener.matchRuleCount == 1)
        #expect(try await listener.busMatchRuleCount() == 1)
        emitter.emit(path: try path("/shared"), interface: testInterface, member: "Tick", arguments: [.uint32(1)])
        try await waitUntil("both got the first tick") { first.count == 1 && second.count == 1 }
        a.cancel()
        #expect(listener.matchRuleCount == 1)
        #expect(try await listener.busMatchRuleCount() == 1)
        emitter.emit(path: try path("/shared"), interface: testInterface, member: "Tick", arguments: [.uint32(2)])
        try await waitUntil("the remaining subscription got the second tick") { second.count == 2 }
        #expect(first.values == [1])
        #expect(second.values == [1, 2])
        b.cancel()
        #expect(listener.matchRuleCount == 0)
        #expect(try await listener.busMatchRuleCount() == 0)
    }

    @Test func aWellKnownSenderFollowsItsOwner() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let first = try await bus.connect("first")
        let second = try await bus.connect("second")
        let name: BusName = "com.example.Emitter"
        let got = Collected<DBusMessage>()
        let subscription = try await listener.subscribe(
            DBusMatchRule(sender: name, path: try path("/w"), interface: testInterface)
        ) { got.append($0) }
        // A broad rule makes the bus deliver every Tick, so the sender filter is ours alone.
        let broad = try await listener.subscribe(DBusMatchRule(member: "Tick")) { _ in }
        let (fromFirst, sentinelA) = try await Self.sentinel(on: listener, from: first)
        let (fromSecond, sentinelB) = try await Self.sentinel(on: listener, from: second)

        #expect(try await first.requestName(name) == .primaryOwner)
        first.emit(path: try path("/w"), interface: testInterface, member: "Tick", arguments: [.uint32(1)])
        second.emit(path: try path("/w"), interface: testInterface, member: "Tick", arguments: [.uint32(2)])
        try Self.sendSentinel(from: first)
        try Self.sendSentinel(from: second)
        try await waitUntil("both sentinels arrived") { fromFirst.count == 1 && fromSecond.count == 1 }
        #expect(got.values.compactMap(Self.index) == [1])
        #expect(got.values.first?.sender == first.uniqueName)

        // The name moves to the second connection: the filter follows it.
        #expect(try await first.releaseName(name))
        #expect(try await second.requestName(name) == .primaryOwner)
        second.emit(path: try path("/w"), interface: testInterface, member: "Tick", arguments: [.uint32(3)])
        first.emit(path: try path("/w"), interface: testInterface, member: "Tick", arguments: [.uint32(4)])
        try Self.sendSentinel(from: first)
        try Self.sendSentinel(from: second)
        try await waitUntil("both sentinels arrived again") { fromFirst.count == 2 && fromSecond.count == 2 }
        #expect(got.values.compactMap(Self.index) == [1, 3])
        withExtendedLifetime((subscription, broad, sentinelA, sentinelB)) {}
    }

    @Test func concurrentSubscriptionsToAWellKnownSenderMissNothing() async throws {
        // Each subscription returns only once its sender's owner is known, even
        // when another subscription started the lookup: the owner's signal sent
        // right after `subscribe` returns is delivered.
        let bus = try TestBus()
        let owner = try await bus.connect("owner")
        let name: BusName = "com.example.Tracked"
        #expect(try await owner.requestName(name) == .primaryOwner)
        for round in 0..<10 {
            let listener = try await bus.connect("listener-\(round)")
            let (done, sentinel) = try await Self.sentinel(on: listener, from: owner)
            let boxes = (0..<6).map { _ in Collected<UInt32>() }
            let subscriptions = try await withThrowingTaskGroup(of: DBusSubscription.self) { group in
                for (index, box) in boxes.enumerated() {
                    group.addTask {
                        let signalPath = try path("/p\(index)")
                        let subscription = try await listener.subscribe(DBusMatchRule(sender: name, path: signalPath)) {
                            if let i = Self.index($0) { box.append(i) }
                        }
                        owner.emit(
                            path: signalPath, interface: testInterface, member: "Tick",
                            arguments: [.uint32(UInt32(index))])
                        return subscription
                    }
                }
                var subscriptions: [DBusSubscription] = []
                for try await subscription in group { subscriptions.append(subscription) }
                return subscriptions
            }
            try Self.sendSentinel(from: owner)
            try await waitUntil("round \(round)'s sentinel arrived") { done.count == 1 }
            #expect(boxes.map(\.values) == (0..<6).map { [UInt32($0)] }, "round \(round)")
            withExtendedLifetime((subscriptions, sentinel)) {}
            listener.close()
        }
    }

    @Test func unicastSignalsFromOtherSendersAreNotDelivered() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let stranger = try await bus.connect("stranger")
        let expected = try await bus.connect("expected")
        let got = Collected<UInt32>()
        let subscription = try await listener.subscribe(
            DBusMatchRule(sender: expected.uniqueName, path: try path("/u"), interface: testInterface)
        ) { if let i = Self.index($0) { got.append(i) } }
        let (done, sentinel) = try await Self.sentinel(on: listener, from: stranger)
        // Sent straight to us: the bus delivers it whatever our rules say.
        stranger.emit(
            path: try path("/u"), interface: testInterface, member: "Tick", arguments: [.uint32(1)],
            destination: listener.uniqueName)
        try Self.sendSentinel(from: stranger, to: listener)
        try await waitUntil("the unicast sentinel arrived") { done.count == 1 }
        #expect(got.values.isEmpty)
        // The sender we asked for gets through, unicast too.
        expected.emit(
            path: try path("/u"), interface: testInterface, member: "Tick", arguments: [.uint32(2)],
            destination: listener.uniqueName)
        try await waitUntil("the expected sender's signal arrived") { got.count == 1 }
        #expect(got.values == [2])
        withExtendedLifetime((subscription, sentinel)) {}
    }

    @Test func arg0WithAQuoteIsAcceptedByTheBus() async throws {
        let bus = try TestBus()
        let listener = try await bus.connect("listener")
        let emitter = try await bus.connect("emitter")
        let got = Collected<UInt32>()
        let subscription = try await listener.subscribe(DBusMatchRule(member: "Quoted", arg0: "it's, 'quoted'")) {
            if let i = Self.index($0) { got.append(i) }
        }
        emitter.emit(
            path: try path("/q"), interface: testInterface, member: "Quoted", arguments: [.string("its"), .uint32(1)])
        emitter.emit(
            path: try path("/q"), interface: testInterface, member: "Quoted",
            arguments: [.string("it's, 'quoted'"), .uint32(2)])
        try await waitUntil("the quoted signal arrived") { got.count >= 1 }
        #expect(got.values == [2])
        #expect(try await listener.busMatchRuleCount() == 1)
        subscription.cancel()
    }
}
