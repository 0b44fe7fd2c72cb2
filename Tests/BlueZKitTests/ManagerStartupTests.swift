import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// Start-up failures are states, never a manager left at `.unknown`: bluetoothd refusing to list
/// its objects (AccessDenied: the bus policy does not let this user talk to it) gives
/// `.unauthorized` until a later attempt succeeds; other failures are tried again.
@Suite(.timeLimit(.minutes(5))) struct ManagerStartupTests {
    static let getManagedObjects = SimulatedMethod(
        interface: "org.freedesktop.DBus.ObjectManager", member: "GetManagedObjects")
    static let accessDenied = SimulatedFault.error(
        name: "org.freedesktop.DBus.Error.AccessDenied", message: "Rejected send message")

    @Test func aCentralThatMayNotReadBluetoothdIsUnauthorizedUntilItMay() async throws {
        let bluez = try await SimulatedBlueZ.start()
        bluez.inject(Self.accessDenied, for: Self.getManagedObjects, count: 3)
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("unauthorized") { central.state == .unauthorized }
        try await waitUntil("powered on once allowed") { central.state == .poweredOn }
        #expect(delegate.states == [.unauthorized, .poweredOn])
    }

    @Test func aPeripheralManagerThatMayNotReadBluetoothdIsUnauthorizedUntilItMay() async throws {
        let bluez = try await SimulatedBlueZ.start()
        bluez.inject(Self.accessDenied, for: Self.getManagedObjects, count: 2)
        let manager = PeripheralManager(
            delegate: nil, queue: DispatchQueue(label: "test.peripheral"),
            options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("unauthorized") { manager.state == .unauthorized }
        try await waitUntil("powered on once allowed") { manager.state == .poweredOn }
    }

    @Test func aFailedFirstLoadIsTriedAgain() async throws {
        let bluez = try await SimulatedBlueZ.start()
        bluez.inject(
            .error(name: "org.freedesktop.DBus.Error.NoReply", message: "no reply"), for: Self.getManagedObjects,
            count: 2)
        let delegate = RecordingCentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on after two failures") { central.state == .poweredOn }
        #expect(delegate.states == [.poweredOn], "no state but the real one")
    }
}
