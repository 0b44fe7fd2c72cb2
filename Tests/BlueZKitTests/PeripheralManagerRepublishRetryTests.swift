import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// A service whose `didAdd` came without error and whose registration then fails when it is
/// published again after bluetoothd restarted is registered again by a later attempt: the app,
/// told it was added, is never left with a service bluetoothd does not hold (interleaving seed 55,
/// profile notifySockets).
@Suite(.timeLimit(.minutes(2))) struct PeripheralManagerRepublishRetryTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.peripheral.republish-retry")
        private let log = PosixMutex<[String]>([])
        var events: [String] { log.withLock { $0 } }
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
            log.withLock { $0.append(error == nil ? "added \(service.uuid)" : "add failed: \(error!)") }
        }
    }

    static let failed = SimulatedFault.error(name: "org.bluez.Error.Failed", message: "Operation failed (injected)")
    static let registerApplication = SimulatedMethod(interface: "org.bluez.GattManager1", member: "RegisterApplication")

    static func service() -> MutableService {
        let service = MutableService(type: BluetoothUUID(0xABCD), primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0xAB01), properties: [.read], value: Data([0x01]), permissions: [.readable])
        ]
        return service
    }

    static func holds(_ bluez: SimulatedBlueZ) -> Bool {
        bluez.adapters.first?.registeredApplications.contains {
            $0.serviceUUIDs.map { $0.lowercased() }.contains("0000abcd-0000-1000-8000-00805f9b34fb")
        } == true
    }

    /// The seed's steps: the add's `RegisterApplication` is answered late, bluetoothd restarts
    /// under it (the add ends without error: the service is published when bluetoothd is back),
    /// and the registration made to the new bluetoothd fails.
    @Test func aRegistrationThatFailsAfterBluetoothdRestartedUnderTheAddIsMadeAgain() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        defer { withExtendedLifetime(manager) {} }
        try await waitUntil("powered on") { manager.state == .poweredOn }
        bluez.inject(.delay(.seconds(5)), for: Self.registerApplication)
        bluez.inject(Self.failed, for: Self.registerApplication)
        manager.add(Self.service())
        try await waitUntil("the add's registration is held") { bluez.unfiredFaultCount == 1 }
        try await bluez.restart()
        try await waitUntil("didAdd") { !recorder.events.isEmpty }
        #expect(recorder.events == ["added ABCD"])
        try await waitUntil("the re-registration failed") { bluez.unfiredFaultCount == 0 }
        try await waitUntil("bluetoothd holds the service again", timeout: .seconds(5)) { Self.holds(bluez) }
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "ABCD", characteristicUUID: "AB01") == [0x01])
        #expect(recorder.events == ["added ABCD"])
    }

    /// The same without the restart under the add: published, bluetoothd restarts, and the
    /// registration to the new bluetoothd fails, twice (the later attempts back off).
    @Test func aServicePublishedBeforeARestartIsRegisteredAgainAfterFailedAttempts() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        defer { withExtendedLifetime(manager) {} }
        try await waitUntil("powered on") { manager.state == .poweredOn }
        try await manager.addService(Self.service())
        #expect(Self.holds(bluez))
        bluez.inject(Self.failed, for: Self.registerApplication, count: 2)
        try await bluez.restart()
        try await waitUntil("both re-registrations failed") { bluez.unfiredFaultCount == 0 }
        try await waitUntil("bluetoothd holds the service again", timeout: .seconds(5)) { Self.holds(bluez) }
        #expect(recorder.events == ["added ABCD"])
    }
}
