import Foundation
import TestSupport
import Testing

@testable import DBus

/// Closing a connection, the bus going away, and what is refused afterwards.
@Suite(.timeLimit(.minutes(5))) struct ClosingTests {
    static func holdingServer(on bus: TestBus) async throws -> (DBusConnection, Collected<DBusMethodInvocation>) {
        let server = try await bus.connect("server")
        let held = Collected<DBusMethodInvocation>()
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Hold") { held.append($0) }])], at: path("/hold"))
        return (server, held)
    }

    static func hold(_ client: DBusConnection, on server: DBusConnection) -> Task<[DBusValue], any Error> {
        Task {
            try await client.call(
                destination: server.uniqueName, path: path("/hold"), interface: testInterface, member: "Hold",
                timeout: .seconds(20))
        }
    }

    @Test func pendingCallsFailWithDisconnectedWhenWeClose() async throws {
        let bus = try TestBus()
        let (server, held) = try await Self.holdingServer(on: bus)
        let client = try await bus.connect("client")
        let calls = (0..<3).map { _ in Self.hold(client, on: server) }
        try await waitUntil("the server holds every call") { held.count == 3 }
        client.close()
        for call in calls {
            let error = await #expect(throws: DBusError.self) { try await call.value }
            #expect(error?.code == .disconnected)
        }
    }

    @Test func everythingIsRefusedAfterClose() async throws {
        let bus = try TestBus()
        let connection = try await bus.connect()
        let message = try DBusMessage.signal(path: path("/s"), interface: testInterface, member: "S")
        connection.close()
        connection.close()  // idempotent
        #expect(!connection.isOpen)
        #expect(connection.send(message) == false)

        let call = await #expect(throws: DBusError.self) {
            try await connection.call(
                destination: .bus, path: path("/org/freedesktop/DBus"), interface: .peer, member: "Ping")
        }
        #expect(call?.code == .disconnected)
        let subscribe = await #expect(throws: DBusError.self) {
            try await connection.subscribe(DBusMatchRule(member: "S")) { _ in }
        }
        #expect(subscribe?.code == .disconnected)
        let watch = await #expect(throws: DBusError.self) {
            try await connection.watchNameOwner("com.example.X") { _ in }
        }
        #expect(watch?.code == .disconnected)
        let export = await #expect(throws: DBusError.self) {
            try await connection.export([DBusInterface(testInterface)], at: path("/e"))
        }
        #expect(export?.code == .disconnected)
        let request = await #expect(throws: DBusError.self) { try await connection.requestName("com.example.X") }
        #expect(request?.code == .disconnected)
        #expect(connection.matchRuleCount == 0)
    }

    @Test func theBusDropsTheNamesOfAClosedConnection() async throws {
        let bus = try TestBus()
        let leaving = try await bus.connect("leaving")
        let observer = try await bus.connect("observer")
        let unique = try #require(leaving.uniqueName)
        #expect(try await leaving.requestName("com.example.Leaving") == .primaryOwner)
        let owner = Collected<BusName?>()
        let watch = try await observer.watchNameOwner("com.example.Leaving") { owner.append($0) }
        leaving.close()
        try await waitUntil("the well-known name lost its owner") { owner.values == [unique, nil] }
        let error = await #expect(throws: DBusError.self) {
            try await observer.call(
                destination: .bus, path: path("/org/freedesktop/DBus"), interface: .bus, member: "GetNameOwner",
                arguments: [.string(unique.rawValue)])
        }
        #expect(error?.code == .nameHasNoOwner)
        #expect(try await observer.nameOwner(of: "com.example.Leaving") == nil)
        watch.cancel()
    }

    @Test func onDisconnectRunsOnceWhenClosed() async throws {
        let bus = try TestBus()
        let connection = try await bus.connect()
        let ran = Collected<String>()
        connection.onDisconnect { ran.append("before") }
        connection.close()
        connection.close()
        try await waitUntil("the handler ran") { ran.count == 1 }
        connection.onDisconnect { ran.append("after") }
        try await waitUntil("a handler added after close ran") { ran.count == 2 }
        #expect(ran.values == ["before", "after"])
    }

    @Test func closingFromInsideAHandlerDoesNotDeadlock() async throws {
        let bus = try TestBus()
        let server = try await bus.connect("server")
        let client = try await bus.connect("client")
        try await server.export(
            [DBusInterface(testInterface, methods: [DBusMethod("Quit") { _ in server.close() }])], at: path("/quit"))
        let error = await #expect(throws: DBusError.self) {
            try await client.call(
                destination: server.uniqueName, path: path("/quit"), interface: testInterface, member: "Quit",
                timeout: .seconds(20))
        }
        // The invocation died with the connection; the bus answered for the vanished peer.
        #expect(error?.code == .noReply)
        #expect(!server.isOpen)
    }

    @Test func theBusGoingAwayDisconnectsEveryone() async throws {
        let bus = try TestBus()
        let (server, held) = try await Self.holdingServer(on: bus)
        let client = try await bus.connect("client")
        let disconnected = Collected<String>()
        client.onDisconnect { disconnected.append("client") }
        server.onDisconnect { disconnected.append("server") }
        let call = Self.hold(client, on: server)
        try await waitUntil("the server holds the call") { held.count == 1 }
        bus.daemon.stop()
        let error = await #expect(throws: DBusError.self) { try await call.value }
        #expect(error?.code == .disconnected)
        try await waitUntil("both connections saw the bus go") { disconnected.count == 2 }
        #expect(Set(disconnected.values) == ["client", "server"])
        #expect(!client.isOpen && !server.isOpen)
        let after = await #expect(throws: DBusError.self) {
            try await client.call(
                destination: .bus, path: path("/org/freedesktop/DBus"), interface: .peer, member: "Ping")
        }
        #expect(after?.code == .disconnected)
    }

    @Test func connectionsOpenedRightAfterOthersCloseStillWork() async throws {
        // A closed connection's socket number is reused by the next one at once;
        // the main loop must watch the new socket, not the old one's ghost.
        let bus = try TestBus()
        let observer = try await bus.connect("observer")
        for round in 0..<15 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<16 {
                    group.addTask {
                        let connection = try await bus.connect("round-\(round)-\(index)")
                        let unique = try #require(connection.uniqueName)
                        #expect(try await connection.nameOwner(of: unique) == unique)
                        connection.close()
                    }
                }
                try await group.waitForAll()
            }
        }
        #expect(try await observer.nameOwner(of: .bus) == .bus)
    }

    @Test func openingAnUnreachableAddressFails() async throws {
        // libdbus's own error names (FileNotFound, NoServer, BadAddress) stay in the message.
        let unreachable = [
            "unix:path=/nonexistent/bluezkit-\(UUID().uuidString)", "unix:abstract=bluezkit-\(UUID().uuidString)",
            "tcp:host=127.0.0.1,port=1",
        ]
        for address in unreachable {
            let error = await #expect(throws: DBusError.self) { try await DBusConnection.open(address: address) }
            #expect(error?.code == .failed, "\(address)")
        }
        for address in ["not an address", "unix:path=/a\u{0}b", "nonsense:key=value"] {
            let error = await #expect(throws: DBusError.self) { try await DBusConnection.open(address: address) }
            #expect(error?.code == .invalidArgs, "\(address.debugDescription)")
        }
    }
}
