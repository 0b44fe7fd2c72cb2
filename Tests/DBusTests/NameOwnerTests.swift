import TestSupport
import Testing

@testable import DBus

/// Well-known names: RequestName / ReleaseName, owner watches, and calls to a peer that leaves.
@Suite(.timeLimit(.minutes(5))) struct NameOwnerTests {
    @Test func requestAndReleaseNameResults() async throws {
        let bus = try TestBus()
        let first = try await bus.connect("first")
        let second = try await bus.connect("second")
        let name: BusName = "com.example.Owned"
        #expect(try await first.nameOwner(of: name) == nil)
        #expect(try await first.requestName(name) == .primaryOwner)
        #expect(try await first.requestName(name) == .alreadyOwner)
        #expect(try await second.requestName(name) == .exists)
        #expect(try await second.nameOwner(of: name) == first.uniqueName)
        // Queued behind the owner, then promoted when it lets go.
        #expect(try await second.requestName(name, flags: []) == .inQueue)
        #expect(try await first.releaseName(name))
        #expect(try await first.releaseName(name) == false)
        #expect(try await first.nameOwner(of: name) == second.uniqueName)
        // Replacement, when the owner allows it.
        #expect(try await second.releaseName(name))
        #expect(try await second.requestName(name, flags: [.allowReplacement]) == .primaryOwner)
        #expect(try await first.requestName(name, flags: [.replaceExisting, .doNotQueue]) == .primaryOwner)
        #expect(try await second.nameOwner(of: name) == first.uniqueName)
        // Releasing a name never owned is not an error.
        #expect(try await second.releaseName("com.example.NeverOwned") == false)
    }

    @Test func requestingAReservedNameFails() async throws {
        let bus = try TestBus()
        let connection = try await bus.connect()
        let error = await #expect(throws: DBusError.self) { try await connection.requestName(.bus) }
        #expect(error?.code == .invalidArgs)
    }

    @Test func watchReportsOwnerChangesAndPeerExit() async throws {
        let bus = try TestBus()
        let watcher = try await bus.connect("watcher")
        let owner = try await bus.connect("owner")
        let name: BusName = "com.example.Watched"
        let seen = Collected<BusName?>()
        let watch = try await watcher.watchNameOwner(name) { seen.append($0) }
        try await waitUntil("the first report") { seen.count == 1 }
        #expect(seen.values == [nil])

        #expect(try await owner.requestName(name) == .primaryOwner)
        try await waitUntil("the new owner is reported") { seen.count == 2 }
        #expect(seen.last == owner.uniqueName)

        owner.close()  // the peer leaves the bus: its names go with it
        try await waitUntil("the owner's exit is reported") { seen.count == 3 }
        #expect(seen.values == [nil, owner.uniqueName, nil])

        // After cancel, nothing more is reported.
        watch.cancel()
        let late = try await bus.connect("late")
        #expect(try await late.requestName(name) == .primaryOwner)
        #expect(try await watcher.nameOwner(of: name) == late.uniqueName)
        #expect(seen.count == 3)
        #expect(watcher.matchRuleCount == 0)
    }

    @Test func watchOfAnOwnedNameReportsTheCurrentOwnerFirst() async throws {
        let bus = try TestBus()
        let watcher = try await bus.connect("watcher")
        let owner = try await bus.connect("owner")
        let name: BusName = "com.example.Present"
        #expect(try await owner.requestName(name) == .primaryOwner)
        let seen = Collected<BusName?>()
        let watch = try await watcher.watchNameOwner(name) { seen.append($0) }
        try await waitUntil("the first report") { seen.count == 1 }
        #expect(seen.values == [owner.uniqueName])
        #expect(try await owner.releaseName(name))
        try await waitUntil("the release is reported") { seen.count == 2 }
        #expect(seen.values == [owner.uniqueName, nil])
        watch.cancel()
    }

    @Test func watchOfAUniqueNameReportsItsDeparture() async throws {
        let bus = try TestBus()
        let watcher = try await bus.connect("watcher")
        let peer = try await bus.connect("peer")
        let unique = try #require(peer.uniqueName)
        #expect(try await watcher.nameOwner(of: unique) == unique)
        let seen = Collected<BusName?>()
        let watch = try await watcher.watchNameOwner(unique) { seen.append($0) }
        try await waitUntil("the first report") { seen.count == 1 }
        #expect(seen.values == [unique])
        peer.close()
        try await waitUntil("the departure is reported") { seen.count == 2 }
        #expect(seen.values == [unique, nil])
        // A unique name that is gone has no owner, and a watch started now says so.
        #expect(try await watcher.nameOwner(of: unique) == nil)
        let late = Collected<BusName?>()
        let lateWatch = try await watcher.watchNameOwner(unique) { late.append($0) }
        try await waitUntil("the late watch's first report") { late.count == 1 }
        #expect(late.values == [nil])
        withExtendedLifetime((watch, lateWatch)) {}
    }

    @Test func watchesStartedDuringChurnEndOnTheFinalOwner() async throws {
        // The first report (GetNameOwner's answer) must never arrive after,
        // and undo, a newer NameOwnerChanged.
        let bus = try TestBus()
        let watcher = try await bus.connect("watcher")
        let a = try await bus.connect("a")
        let b = try await bus.connect("b")
        let name: BusName = "com.example.Churn"
        let stop = Locked(false)
        // Four tasks take the name from each other as fast as the bus answers.
        let churners = [a, b, a, b].map { who in
            Task {
                var turns = 0
                while !stop.value {
                    _ = try await who.requestName(name, flags: [.allowReplacement, .replaceExisting, .doNotQueue])
                    turns += 1
                }
                return turns
            }
        }
        var watches: [(DBusSubscription, Collected<BusName?>)] = []
        for _ in 0..<60 {
            let seen = Collected<BusName?>()
            watches.append((try await watcher.watchNameOwner(name) { seen.append($0) }, seen))
        }
        stop.value = true
        for churner in churners { #expect(try await churner.value > 0) }
        let final = try #require(try await watcher.nameOwner(of: name))
        // Every NameOwnerChanged the bus sent before that answer has been routed by now.
        for (index, (_, seen)) in watches.enumerated() {
            #expect(seen.last == final, "watch \(index): \(seen.values)")
        }
        for (watch, _) in watches { watch.cancel() }
    }

    @Test func callPendingToAPeerThatLeavesFailsWithNoReply() async throws {
        // The bus answers for a peer that leaves without replying:
        // org.freedesktop.DBus.Error.NoReply, sent by org.freedesktop.DBus.
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        let held = Collected<DBusMethodInvocation>()
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Hold") { held.append($0) }])], at: path("/hold"))
        let call = Task { () async throws(DBusError) -> [DBusValue] in
            try await client.call(
                destination: server.uniqueName, path: ObjectPath(trusted: "/hold"), interface: testInterface,
                member: "Hold", timeout: .seconds(20))
        }
        try await waitUntil("the server holds the call") { held.count == 1 }
        server.close()
        let error = await #expect(throws: DBusError.self) { try await call.value }
        #expect(error?.code == .noReply)
        #expect(error?.name == "org.freedesktop.DBus.Error.NoReply")
        // The held invocation can no longer answer, and that is harmless.
        held.values.first?.reply()
        #expect(client.isOpen)
    }
}
