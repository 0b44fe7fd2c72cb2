import BlueZKit
import BlueZKitTesting
import Dispatch
import Locking
import TestSupport
import Testing

/// The peripheral manager's async counterparts, and its adapters, on the simulated BlueZ.
@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerAsyncTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.peripheral.async")
        private let log = PosixMutex<[String]>([])
        var events: [String] { log.withLock { $0 } }
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
            log.withLock { $0.append(error == nil ? "added \(service.uuid)" : "add failed") }
        }
        func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
            log.withLock { $0.append(error == nil ? "advertising" : "advertising failed") }
        }
    }

    @Test func addsServicesAndAdvertisesAndThrowsWhatTheDelegateGets() async throws {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        #expect(manager.adapters.map(\.name) == ["hci0"])
        #expect(manager.adapters.first?.isInUse == true)

        let service = MutableService(type: BluetoothUUID(0xFFE0), primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0xFFE1), properties: [.read], value: nil, permissions: [.readable])
        ]
        try await manager.addService(service)
        // The delegate heard it first.
        #expect(recorder.events == ["added FFE0"])
        #expect(bluez.adapters.first?.registeredApplications.count == 1)

        let data = AdvertisementData(localName: "Async", serviceUUIDs: [BluetoothUUID(0xFFE0)])
        try await manager.startAdvertising(with: data)
        #expect(manager.isAdvertising)
        let error = await #expect(throws: BluetoothError.self) { try await manager.startAdvertising(with: data) }
        #expect(error?.code == .alreadyAdvertising)
        #expect(recorder.events == ["added FFE0", "advertising", "advertising failed"])
        manager.stopAdvertising()
    }
}
