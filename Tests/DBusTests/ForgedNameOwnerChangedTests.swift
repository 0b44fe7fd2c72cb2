import Foundation
import TestSupport
import Testing

@testable import DBus

/// `NameOwnerChanged` is believed only from the bus driver: another process on the bus can send
/// one of its own making, straight to us (a unicast signal, which no match rule filters), naming
/// a service we follow. Believed, it would make us see bluetoothd leave, or drop the owner a
/// reconnection is restoring, and never see it back.
@Suite(.timeLimit(.minutes(1)))
struct ForgedNameOwnerChangedTests {
    static let service = BusName(trusted: "com.example.Followed")
    static let marker: MemberName = "Marker"

    /// `NameOwnerChanged(service, old, new)` from `forger`, sent to `target` only, then a
    /// marker signal: once the marker is in, the forgery was handled.
    static func forge(from forger: DBusConnection, to target: DBusConnection, old: String, new: String) throws {
        let forged = try DBusMessage.signal(
            path: path("/org/freedesktop/DBus"), interface: .bus, member: "NameOwnerChanged",
            destination: target.uniqueName,
            arguments: [.string(service.rawValue), .string(old), .string(new)])
        #expect(forger.send(forged))
        // The same as a broadcast, for whoever listens to every signal.
        let broadcast = try DBusMessage.signal(
            path: path("/org/freedesktop/DBus"), interface: .bus, member: "NameOwnerChanged",
            arguments: [.string(service.rawValue), .string(old), .string(new)])
        #expect(forger.send(broadcast))
        let marker = try DBusMessage.signal(
            path: path("/marker"), interface: testInterface, member: Self.marker, destination: target.uniqueName)
        #expect(forger.send(marker))
    }

    /// Subscribes `target` to the forger's marker signals; returns their count.
    static func markers(on target: DBusConnection, from forger: DBusConnection) async throws -> (
        DBusSubscription, Collected<Bool>
    ) {
        let seen = Collected<Bool>()
        let subscription = try await target.subscribe(
            DBusMatchRule(sender: forger.uniqueName, interface: testInterface, member: Self.marker)
        ) { _ in seen.append(true) }
        return (subscription, seen)
    }

    @Test func aForgedOwnerChangeIsNotReportedToAWatch() async throws {
        let bus = try TestBus()
        let owner = try await bus.connect("owner")
        #expect(try await owner.requestName(Self.service) == .primaryOwner)
        let watcher = try await bus.connect("watcher")
        let forger = try await bus.connect("forger")
        let owners = Collected<String>()
        let watch = try await watcher.watchNameOwner(Self.service) { owners.append($0?.rawValue ?? "none") }
        defer { watch.cancel() }
        try await waitUntil("the owner is reported") { owners.count == 1 }
        let (subscription, markers) = try await Self.markers(on: watcher, from: forger)
        defer { subscription.cancel() }

        try Self.forge(from: forger, to: watcher, old: owner.uniqueName!.rawValue, new: "")
        try await waitUntil("the marker after the forgery arrives") { markers.count == 1 }
        #expect(owners.values == [owner.uniqueName!.rawValue], "the service did not leave")
    }

    @Test func aForgedOwnerChangeDoesNotCancelTheOwnerLookUpOfAReconnection() async throws {
        let bus = try TestBus()
        let watcher = try await DBusConnection.open(
            address: bus.daemon.address, label: "watcher", reconnect: ReconnectTests.quickly)
        defer { watcher.close() }
        let forger = try await bus.connect("forger")
        let watch = try await watcher.watchNameOwner(Self.service) { _ in }
        defer { watch.cancel() }
        let (subscription, markers) = try await Self.markers(on: watcher, from: forger)
        defer { subscription.cancel() }

        // As just after a reconnection: the new bus was asked who owns the service, no answer yet.
        watcher.onQueue { watcher.restoringOwners = [Self.service] }
        try Self.forge(from: forger, to: watcher, old: "", new: ":1.9999")
        try await waitUntil("the marker after the forgery arrives") { markers.count == 1 }
        // Before: the forgery counted as newer news, and the bus's answer would have been dropped.
        #expect(watcher.onQueue { watcher.restoringOwners } == [Self.service])
    }
}
