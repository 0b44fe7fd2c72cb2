import BlueZKit
import BlueZKitTesting
import Foundation
import TestSupport
import Testing

/// The async forms of `remove`, `removeAllServices` and `stopAdvertising` return once bluetoothd
/// holds nothing of what they took back, even when bluetoothd is slow to answer.
@Suite(.timeLimit(.minutes(2))) struct PeripheralManagerAsyncRemovalTests {
    typealias Recorder = PeripheralManagerAsyncTests.Recorder

    static let unregisterApplication = SimulatedMethod(
        interface: "org.bluez.GattManager1", member: "UnregisterApplication")
    static let unregisterAdvertisement = SimulatedMethod(
        interface: "org.bluez.LEAdvertisingManager1", member: "UnregisterAdvertisement")

    static func service(_ uuid: UInt16) -> MutableService {
        let service = MutableService(type: BluetoothUUID(uuid), primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(uuid + 1), properties: [.read], value: Data([1]), permissions: [.readable])
        ]
        return service
    }

    /// A simulated bluetoothd and a peripheral manager on it, powered on; stop the bluetoothd after.
    static func poweredOnManager() async throws -> (SimulatedBlueZ, Recorder, PeripheralManager, SimulatedAdapter) {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        for await state in manager.states() where state == .poweredOn { break }
        let adapter = try #require(bluez.adapters.first)
        return (bluez, recorder, manager, adapter)
    }

    @Test func removalsReturnOnceBluetoothdDroppedTheServices() async throws {
        let (bluez, recorder, manager, adapter) = try await Self.poweredOnManager()
        defer {
            bluez.stop()
            withExtendedLifetime(recorder) {}
        }
        let (first, second, third) = (Self.service(0xFF10), Self.service(0xFF20), Self.service(0xFF30))
        for service in [first, second, third] { try await manager.addService(service) }
        #expect(adapter.registeredApplications.count == 3)

        // bluetoothd answers slowly: the call still returns only once it answered.
        bluez.inject(.delay(TestTime.scaled(.milliseconds(300))), for: Self.unregisterApplication)
        await manager.removeService(first)
        #expect(bluez.unfiredFaultCount == 0)
        #expect(adapter.registeredApplications.count == 2)

        bluez.inject(.delay(TestTime.scaled(.milliseconds(300))), for: Self.unregisterApplication, count: 2)
        await manager.removeAllServicesAndWait()
        #expect(bluez.unfiredFaultCount == 0)
        #expect(adapter.registeredApplications.isEmpty)
    }

    @Test func stopAdvertisingAndWaitReturnsOnceBluetoothdDroppedTheAdvertisement() async throws {
        let (bluez, recorder, manager, adapter) = try await Self.poweredOnManager()
        defer { bluez.stop() }
        try await manager.startAdvertising(with: AdvertisementData(localName: "Stop"))
        #expect(adapter.registeredAdvertisements.count == 1)

        bluez.inject(.delay(TestTime.scaled(.milliseconds(300))), for: Self.unregisterAdvertisement)
        await manager.stopAdvertisingAndWait()
        #expect(bluez.unfiredFaultCount == 0)
        #expect(adapter.registeredAdvertisements.isEmpty)
        #expect(!manager.isAdvertising)

        // Stopped while bluetoothd registers the next one: it returns after the advertisement was
        // given back and the delegate heard that the start was cancelled.
        bluez.inject(
            .delay(TestTime.scaled(.milliseconds(300))), for: PeripheralManagerCleanupTests.registerAdvertisement)
        let start = Task { try await manager.startAdvertising(with: AdvertisementData(localName: "Again")) }
        try await waitUntil("RegisterAdvertisement reached bluetoothd") { bluez.unfiredFaultCount == 0 }
        await manager.stopAdvertisingAndWait()
        #expect(adapter.registeredAdvertisements.isEmpty)
        #expect(!manager.isAdvertising)
        #expect(recorder.events == ["advertising", "advertising failed"])
        let error = await #expect(throws: BluetoothError.self) { try await start.value }
        #expect(error?.code == .operationCancelled)

        // Nothing to stop: it returns at once.
        await manager.stopAdvertisingAndWait()
        #expect(adapter.registeredAdvertisements.isEmpty)
    }
}
