import BlueZ
import DBus
import Locking
import TestSupport
import Testing

/// A local process that forges bluetoothd's departure (`NameOwnerChanged` for `org.bluez`, sent
/// to everyone and straight to us) changes nothing: the cache stays loaded and does not load
/// the tree again. Only the bus driver is believed (`ForgedNameOwnerChangedTests` in the D-Bus
/// layer has the case this guards most: a reconnection's owner look-up).
@Suite(.timeLimit(.minutes(1))) struct ForgedBluetoothdDepartureTests {
    @Test func aForgedDepartureOfBluetoothdChangesNothing() async throws {
        let (bus, standIn, cache, recorder) = try await BlueZObjectCacheLoadTests.start { _ in [.tree] }
        defer { withExtendedLifetime(bus) {} }
        try await waitUntil("loaded") { recorder.log == ["loaded"] }
        let forger = try await bus.connect("forger")
        let markers = PosixMutex(0)
        let marker = try await bus.app.subscribe(
            DBusMatchRule(sender: forger.uniqueName, interface: "com.example.Forger", member: "Marker")
        ) { _ in markers.withLock { $0 += 1 } }
        defer { marker.cancel() }

        let owner = bus.bluetoothd.uniqueName!.rawValue
        for destination in [bus.app.uniqueName, nil] {
            #expect(
                forger.send(
                    try DBusMessage.signal(
                        path: ObjectPath("/org/freedesktop/DBus"), interface: .bus, member: "NameOwnerChanged",
                        destination: destination, arguments: [.string("org.bluez"), .string(owner), .string("")])))
        }
        #expect(
            forger.send(
                try DBusMessage.signal(
                    path: ObjectPath("/marker"), interface: "com.example.Forger", member: "Marker",
                    destination: bus.app.uniqueName)))
        try await waitUntil("the marker after the forgeries arrives") { markers.withLock { $0 } == 1 }
        #expect(recorder.log == ["loaded"], "bluetoothd was not seen leaving")
        #expect(standIn.calls.withLock { $0 } == 1, "the tree was not loaded again")
        #expect(bus.app.queue.sync { cache.isLoaded })
    }
}
