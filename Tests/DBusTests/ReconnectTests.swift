import Foundation
import TestSupport
import Testing

@testable import DBus

/// A connection with a reconnect policy outlives a `dbus-daemon` restart: what it exported,
/// subscribed to, watched and owned works again on the new bus.
@Suite(.timeLimit(.minutes(1)))
struct ReconnectTests {
    static let quickly = DBusConnection.ReconnectPolicy(delays: [.milliseconds(20), .milliseconds(50)])
    static let serviceName = BusName(trusted: "com.example.Service")
    static let ownName = BusName(trusted: "com.example.Reconnecting")

    @Test func aRestartedBusIsJoinedAgainWithEverythingItHad() async throws {
        let bus = try TestBus()
        let connection = try await DBusConnection.open(
            address: bus.daemon.address, label: "reconnecting", reconnect: Self.quickly)
        defer { connection.close() }
        let events = Collected<String>()
        connection.onLifecycleEvent { event in
            switch event {
            case .lost: events.append("lost")
            case .reconnected(let name): events.append("reconnected as \(name.rawValue)")
            }
        }
        try await connection.exportEcho()
        #expect(try await connection.requestName(Self.ownName) == .primaryOwner)
        let owners = Collected<String>()
        let watch = try await connection.watchNameOwner(Self.serviceName) { owners.append($0?.rawValue ?? "none") }
        defer { watch.cancel() }
        let signals = Collected<String>()
        let subscription = try await connection.subscribe(
            DBusMatchRule(sender: Self.serviceName, interface: testInterface, member: "Ping")
        ) { message in signals.append(message.firstStringArgument ?? "?") }
        defer { subscription.cancel() }

        var service = try await Self.startService(on: bus)
        try await waitUntil("the service's owner is seen") { owners.last?.hasPrefix(":") == true }
        service.emit(path: try path("/s"), interface: testInterface, member: "Ping", arguments: [.string("before")])
        try await waitUntil("the first signal arrives") { signals.values == ["before"] }

        try bus.daemon.restart()
        try await waitUntil("the loss is reported and the service seen gone") {
            events.values.first == "lost" && owners.last == "none"
        }
        try await waitUntil("the connection is back") { events.count == 2 && connection.isOpen }
        // Registered anew: the name the new bus gave is the one the connection reports.
        #expect(events.values == ["lost", "reconnected as \(connection.uniqueName?.rawValue ?? "?")"])

        // The service comes back on the new bus: its owner is reported and its signals arrive.
        service.close()
        service = try await Self.startService(on: bus)
        defer { service.close() }
        try await waitUntil("the new owner is seen") { owners.last == service.uniqueName?.rawValue }
        service.emit(path: try path("/s"), interface: testInterface, member: "Ping", arguments: [.string("after")])
        try await waitUntil("the signal after the restart arrives") { signals.values == ["before", "after"] }
        // Our exported object answers on the new bus, and our well-known name is ours again.
        #expect(try await service.echo([.string("hi")], via: connection) == [.string("hi")])
        let nameOwner = try await service.nameOwner(of: Self.ownName)
        #expect(nameOwner == connection.uniqueName)
    }

    @Test func callsUnderWayFailAndSendsAreRefusedUntilReconnected() async throws {
        let bus = try TestBus()
        let (server, held) = try await ClosingTests.holdingServer(on: bus)
        let connection = try await DBusConnection.open(
            address: bus.daemon.address, label: "reconnecting",
            reconnect: DBusConnection.ReconnectPolicy(delays: [.seconds(30)]))
        defer { connection.close() }
        let call = ClosingTests.hold(connection, on: server)
        try await waitUntil("the server holds the call") { held.count == 1 }
        try bus.daemon.restart()
        let error = await #expect(throws: DBusError.self) { try await call.value }
        #expect(error?.code == .disconnected)
        // Waiting 30 s before trying again: the connection is away meanwhile.
        try await waitUntil("the connection knows it is away") { connection.isReconnecting }
        #expect(!connection.isOpen)
        let signal = try DBusMessage.signal(path: try path("/s"), interface: testInterface, member: "Ping")
        #expect(!connection.send(signal))
        // close() ends it for good: no reconnection, onDisconnect runs.
        let closed = Collected<Bool>()
        connection.onDisconnect { closed.append(true) }
        connection.close()
        try await waitUntil("the close is reported") { closed.count == 1 }
        #expect(!connection.isReconnecting)
    }

    @Test func aConnectionWithoutAPolicyEndsWithItsBus() async throws {
        let bus = try TestBus()
        let connection = try await bus.connect("plain")
        let closed = Collected<Bool>()
        connection.onDisconnect { closed.append(true) }
        try bus.daemon.restart()
        try await waitUntil("the loss ends the connection") { closed.count == 1 }
        #expect(!connection.isOpen && !connection.isReconnecting)
    }

    @Test func aBusThatStaysAwayIsTriedAgainUntilItIsBack() async throws {
        let bus = try TestBus()
        let connection = try await DBusConnection.open(
            address: bus.daemon.address, label: "reconnecting", reconnect: Self.quickly)
        defer { connection.close() }
        let events = Collected<String>()
        connection.onLifecycleEvent { event in
            if case .reconnected = event { events.append("reconnected") }
        }
        // The socket is gone while attempts fail, then a daemon listens there again.
        bus.daemon.kill()
        try await waitUntil("several attempts failed") { connection.onQueue { connection.reconnectFailures } >= 3 }
        #expect(!connection.isOpen)
        try bus.daemon.relaunch()
        try await waitUntil("reconnected") { events.count == 1 && connection.isOpen }
        let reply = try await connection.call(
            destination: .bus, path: path("/org/freedesktop/DBus"), interface: .peer, member: "Ping")
        #expect(reply.isEmpty)
    }

    @Test func theAddressLosesItsGUIDForReconnecting() {
        #expect(
            DBusConnection.addressForReconnecting("unix:path=/tmp/x/bus,guid=abc") == "unix:path=/tmp/x/bus")
        #expect(
            DBusConnection.addressForReconnecting("unix:guid=1,path=/a;tcp:host=h,port=1")
                == "unix:path=/a;tcp:host=h,port=1")
        #expect(DBusConnection.addressForReconnecting("unix:path=/run/dbus/socket") == "unix:path=/run/dbus/socket")
    }

    /// A connection that owns the service name.
    static func startService(on bus: TestBus) async throws -> DBusConnection {
        let service = try await DBusConnection.open(address: bus.daemon.address, label: "service")
        #expect(try await service.requestName(serviceName) == .primaryOwner)
        return service
    }
}

/// The reading thread never ends silently: a descriptor it cannot poll is reported, so that the
/// connection is torn down (or connected again) instead of left deaf.
@Suite(.timeLimit(.minutes(1)))
struct ReadWatchThreadFailureTests {
    @Test func aDescriptorThatCannotBePolledIsReported() async throws {
        let failures = Collected<String>()
        let readable = Collected<Bool>()
        let queue = DispatchQueue(label: "read-watch-failure")
        // No process here has this many descriptors open: poll reports it as invalid (POLLNVAL).
        let thread = DescriptorReadiness.dedicated(
            999_999, .poll, closesDescriptor: false, queue: queue, enabled: false,
            handler: {
                readable.append(true)
                return true
            }, onFailure: { failures.append($0) })
        thread.setEnabled(true)
        try await waitUntil("the failure is reported") { failures.count == 1 }
        #expect(failures.values.first?.contains("no longer valid") == true)
        // Before: POLLNVAL counted as readable, and the handler ran in a tight loop for ever.
        #expect(readable.count == 0)
        thread.cancel()
    }
}
