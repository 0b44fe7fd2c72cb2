import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct PeripheralManagerTests {
    final class Recorder: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.peripheral-manager")
        let log = PosixMutex<[String]>([])
        let errors = PosixMutex<[(any Error)?]>([])
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
            let state = peripheral.state
            log.withLock { $0.append("state \(state)") }
        }
        func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
            log.withLock { $0.append("advertising") }
            errors.withLock { $0.append(error) }
        }
    }

    @Test func followsTheAdapterState() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        bluez.adapters.first?.setPowered(false)
        try await waitUntil("powered off") { manager.state == .poweredOff }
        recorder.queue.sync {}  // the state is set right before the delegate call, in the same block
        #expect(recorder.log.withLock { $0 } == ["state poweredOn", "state poweredOff"])
    }

    @Test func refusesAdvertisementsThatDoNotFitInsteadOfCuttingThem() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        // 3 (flags) + 2 + 32 (two 128-bit UUIDs) = 37 bytes > 31 (the name is not counted).
        manager.startAdvertising([
            CBAdvertisementDataLocalNameKey: "A long name.",
            CBAdvertisementDataServiceUUIDsKey: [
                BluetoothUUID(string: "12345678-1234-5678-1234-56789ABCDEF0"),
                BluetoothUUID(string: "12345678-1234-5678-1234-56789ABCDEF1"),
            ],
        ])
        try await waitUntil("answered") { recorder.errors.withLock { $0.count } == 1 }
        let error = try #require(recorder.errors.withLock { $0.first } as? BluetoothError)
        #expect(error.code == .advertisingDataTooLarge)
        #expect(!manager.isAdvertising)
    }

    @Test func aLongNameIsNotCountedAgainstTheAdvertisingData() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        // 3 (flags) + 18 (one 128-bit UUID) + 10 (manufacturer data) = 31: the most that fits. The
        // 29-byte name goes in the scan response (bluetoothd's generate_scan_rsp). Before: refused
        // as 62 bytes.
        let name = "A peripheral name of 29 bytes"
        manager.startAdvertising(
            AdvertisementData(
                localName: name, manufacturerData: Data([0xFF, 0xFF, 1, 2, 3, 4, 5, 6]),
                serviceUUIDs: [BluetoothUUID(string: "12345678-1234-5678-1234-56789ABCDEF0")]))
        try await waitUntil("answered") { recorder.errors.withLock { $0.count } == 1 }
        #expect(recorder.errors.withLock { $0.first ?? nil } == nil)
        #expect(manager.isAdvertising)
        let advertisement = try #require(bluez.adapters.first?.registeredAdvertisements.first)
        #expect(advertisement.localName == name)
        #expect(advertisement.dataLength == 31)
    }

    @Test func refusesMistypedAdvertisementData() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: 42])
        try await waitUntil("answered") { recorder.errors.withLock { $0.count } == 1 }
        #expect((recorder.errors.withLock { $0.first } as? BluetoothError)?.code == .invalidParameters)
    }

    @Test func countsSolicitedServicesAgainstTheLegacyLimit() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        // 3 (flags) + 2 + 2 (180D) + 2 + 16 (one solicited 128-bit UUID) + 4 + 4 (manufacturer
        // data) = 33 bytes > 31.
        manager.startAdvertising(
            AdvertisementData(
                localName: "Sensor", manufacturerData: Data([0xFF, 0xFF, 1, 2, 3, 4]),
                serviceUUIDs: [BluetoothUUID(0x180D)],
                solicitedServiceUUIDs: [BluetoothUUID(string: "12345678-1234-5678-1234-56789ABCDEF0")]))
        try await waitUntil("answered") { recorder.errors.withLock { $0.count } == 1 }
        #expect((recorder.errors.withLock { $0.first } as? BluetoothError)?.code == .advertisingDataTooLarge)
    }

    @Test func refusesASecondAdvertisementUntilStopped() async throws {
        let bluez = try await SimulatedBlueZ.start()
        let recorder = Recorder()
        let manager = PeripheralManager(
            delegate: recorder, queue: recorder.queue, options: PeripheralManagerOptions(busAddress: bluez.busAddress))
        try await waitUntil("powered on") { manager.state == .poweredOn }
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "One"])
        try await waitUntil("advertising") { manager.isAdvertising }
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Two"])
        try await waitUntil("answered twice") { recorder.errors.withLock { $0.count } == 2 }
        #expect((recorder.errors.withLock { $0.last } as? BluetoothError)?.code == .alreadyAdvertising)
        #expect(bluez.adapters.first?.registeredAdvertisements.map(\.localName) == ["One"])
        manager.stopAdvertising()
        manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Two"])
        try await waitUntil("advertising the second") {
            bluez.adapters.first?.registeredAdvertisements.map(\.localName) == ["Two"]
        }
    }
}
