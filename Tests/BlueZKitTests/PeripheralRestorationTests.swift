import BlueZKit
import BlueZKitTesting
import Dispatch
import ExampleSupport
import Foundation
import Synchronization
import Testing

/// State restoration of a peripheral manager on the simulated BlueZ: a released manager stands
/// for a killed process, a new one with the same identifier for the relaunched process.
@Suite struct PeripheralRestorationTests {
    final class Publisher: PeripheralManagerDelegate, @unchecked Sendable {
        let queue = DispatchQueue(label: "test.publisher")
        let log = Mutex<[String]>([])
        let restoredServices = Mutex<[MutableService]>([])
        let restoredName = Mutex<String?>(nil)
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
            let state = peripheral.state
            log.withLock { $0.append("state \(state)") }
        }
        func peripheralManager(_ peripheral: PeripheralManager, willRestoreState dict: [String: Any]) {
            let services = dict[CBPeripheralManagerRestoredStateServicesKey] as? [MutableService] ?? []
            let advertisement = dict[CBPeripheralManagerRestoredStateAdvertisementDataKey] as? [String: Any]
            let name = advertisement?[CBAdvertisementDataLocalNameKey] as? String
            restoredServices.withLock { $0 = services }
            restoredName.withLock { $0 = name }
            log.withLock { $0.append("restore") }
        }
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            log.withLock { $0.append("added \(service.uuid)") }
        }
        func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
            log.withLock { $0.append("advertising") }
        }
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: MutableCharacteristic
        ) {
            log.withLock { $0.append("subscribed \(characteristic.uuid)") }
        }
        var events: [String] { log.withLock { $0 } }
    }

    final class WeakManager: @unchecked Sendable {
        weak var value: PeripheralManager?
    }

    @Test func aRelaunchedPeripheralPublishesAndAdvertisesAgainOnItsOwn() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "bluezkit-prest-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let options = CentralManagerOptions(
            restoreIdentifier: "heart-rate-sensor", busAddress: bluez.busAddress,
            restorationStore: RestorationStore(directory: directory))
        let adapter = try #require(bluez.adapters.first)
        let released = WeakManager()
        do {
            let first = Publisher()
            let manager = PeripheralManager(delegate: first, queue: first.queue, options: options)
            released.value = manager
            try await waitUntil("powered on") { manager.state == .poweredOn }
            let service = MutableService(type: BluetoothUUID(0x180D), primary: true)
            service.characteristics = [
                MutableCharacteristic(type: BluetoothUUID(0x2A37), properties: [.notify], value: nil, permissions: []),
                MutableCharacteristic(
                    type: BluetoothUUID(0x2A38), properties: [.read], value: Data([0x03]), permissions: [.readable]),
            ]
            manager.add(service)
            try await waitUntil("added") { first.events.contains("added 180D") }
            manager.startAdvertising([
                CBAdvertisementDataLocalNameKey: "HRM", CBAdvertisementDataServiceUUIDsKey: [BluetoothUUID(0x180D)],
            ])
            try await waitUntil("advertising") { first.events.contains("advertising") }
            #expect(
                PeripheralManager.savedRestoreIdentifiers(in: RestorationStore(directory: directory)) == [
                    "heart-rate-sensor"
                ])
            #expect(CentralManager.savedRestoreIdentifiers(in: RestorationStore(directory: directory)).isEmpty)
        }
        try await waitUntil("the first manager is released") { released.value == nil }
        try await waitUntil("bluetoothd dropped its registrations") {
            adapter.registeredApplications.isEmpty && adapter.registeredAdvertisements.isEmpty
        }

        let second = Publisher()
        let manager = PeripheralManager(delegate: second, queue: second.queue, options: options)
        try await waitUntil("restored and powered on") { second.events.count >= 2 }
        #expect(Array(second.events.prefix(2)) == ["restore", "state poweredOn"])
        #expect(second.restoredName.withLock { $0 } == "HRM")
        let service = try #require(second.restoredServices.withLock { $0.first })
        #expect(service.uuid == BluetoothUUID(0x180D))
        #expect(service.characteristics?.map(\.uuid) == [BluetoothUUID(0x2A37), BluetoothUUID(0x2A38)])
        #expect(service.characteristics?.last?.value == Data([0x03]))
        try await waitUntil("published and advertising again") {
            adapter.registeredApplications.count == 1 && adapter.registeredAdvertisements.first?.localName == "HRM"
        }
        try await waitUntil("isAdvertising") { manager.isAdvertising }
        #expect(!second.events.contains { $0.hasPrefix("added") }, "restored services are not re-reported as added")
        let central = try bluez.addCentral(address: "11:22:33:44:55:66")
        #expect(try await central.read(serviceUUID: "180D", characteristicUUID: "2A38") == [0x03])
        _ = try await central.subscribe(serviceUUID: "180D", characteristicUUID: "2A37")
        try await waitUntil("a subscription to the restored characteristic") {
            second.events.contains("subscribed 2A37")
        }
        let measurement = try #require(service.characteristics?.first)
        #expect(manager.updateValue(Data([0, 70]), for: measurement, onSubscribedCentrals: nil))
    }
}
