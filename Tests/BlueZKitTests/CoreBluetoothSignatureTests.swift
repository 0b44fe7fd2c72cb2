import BlueZKit
import BlueZKitTesting
import Dispatch
import Foundation
import Locking
import TestSupport
import Testing

/// Each event with two signatures (Core Bluetooth's and the typed Linux one) reaches an app that
/// implements either exactly once, and one that implements both through Core Bluetooth's only.
@Suite(.timeLimit(.minutes(5))) struct CoreBluetoothSignatureTests {
    /// Counts which signature was called, by name.
    final class Calls: @unchecked Sendable {
        let queue = DispatchQueue(label: "test.signatures")
        private let names = PosixMutex<[String]>([])
        var all: [String] { names.withLock { $0 } }
        func record(_ name: String) { names.withLock { $0.append(name) } }
    }

    final class AppleCentral: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
        let calls = Calls()
        func centralManagerDidUpdateState(_ central: CBCentralManager) {}
        func centralManager(
            _ central: CBCentralManager, didDiscover peripheral: CBPeripheral, advertisementData: [String: Any],
            rssi RSSI: NSNumber
        ) {
            calls.record("apple \(advertisementData[CBAdvertisementDataLocalNameKey] as? String ?? "?") \(RSSI)")
        }
    }

    final class TypedCentral: CentralManagerDelegate, @unchecked Sendable {
        let calls = Calls()
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi RSSI: Int
        ) {
            calls.record("typed \(advertisementData.localName ?? "?") \(RSSI)")
        }
    }

    final class BothCentral: CentralManagerDelegate, @unchecked Sendable {
        let calls = Calls()
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: [String: Any],
            rssi RSSI: NSNumber
        ) {
            calls.record("apple")
        }
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi RSSI: Int
        ) {
            calls.record("typed")
        }
    }

    func discover(with delegate: some CentralManagerDelegate, calls: Calls) async throws -> [String] {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let sensor = SimulatedPeripheral(address: "C0:FF:EE:00:01:01", name: "Sig", rssi: -42, serviceUUIDs: ["180D"])
        try bluez.addPeripheral(sensor)
        let central = CentralManager(
            delegate: delegate, queue: calls.queue, options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        try await waitUntil("powered on") { central.state == .poweredOn }
        central.scanForPeripherals(withServices: [CBUUID(string: "0x180D")], options: nil)
        sensor.advertise()
        try await waitUntil("discovered") { !calls.all.isEmpty }
        // A second peripheral's discovery marks the end: anything for the first came before it.
        let marker = SimulatedPeripheral(address: "C0:FF:EE:00:01:02", name: "End", rssi: -50, serviceUUIDs: ["180D"])
        try bluez.addPeripheral(marker)
        marker.advertise()
        try await waitUntil("the marker discovered") { calls.all.count >= 2 }
        central.stopScan()
        return calls.queue.sync { calls.all }
    }

    @Test func appleSignatureAloneIsCalledOnce() async throws {
        let app = AppleCentral()
        #expect(try await discover(with: app, calls: app.calls) == ["apple Sig -42", "apple End -50"])
    }

    @Test func typedSignatureAloneIsCalledOnce() async throws {
        let app = TypedCentral()
        #expect(try await discover(with: app, calls: app.calls) == ["typed Sig -42", "typed End -50"])
    }

    @Test func withBothOnlyApplesIsCalled() async throws {
        let app = BothCentral()
        #expect(try await discover(with: app, calls: app.calls) == ["apple", "apple"])
    }

    final class BothPeripheralManager: PeripheralManagerDelegate, @unchecked Sendable {
        let calls = Calls()
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
            calls.record("apple \(service.uuid)")
        }
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            calls.record("typed \(service.uuid)")
        }
    }

    final class TypedPeripheralManager: PeripheralManagerDelegate, @unchecked Sendable {
        let calls = Calls()
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
            calls.record("typed \(service.uuid)")
        }
    }

    func add(with delegate: some PeripheralManagerDelegate, calls: Calls) async throws -> [String] {
        let bluez = try await SimulatedBlueZ.start()
        defer { bluez.stop() }
        let manager = PeripheralManager(
            delegate: delegate, queue: calls.queue, options: [BlueZKitOptionBusAddressKey: bluez.busAddress])
        try await waitUntil("powered on") { manager.state == .poweredOn }
        manager.add(MutableService(type: CBUUID(string: "180D"), primary: true))
        try await waitUntil("added") { !calls.all.isEmpty }
        // A second service's report marks the end: anything for the first came before it.
        manager.add(MutableService(type: CBUUID(string: "180F"), primary: true))
        try await waitUntil("the second added") { calls.all.count >= 2 }
        return calls.queue.sync { calls.all }
    }

    @Test func peripheralManagerWithBothOnlyApplesIsCalled() async throws {
        let app = BothPeripheralManager()
        #expect(try await add(with: app, calls: app.calls) == ["apple 180D", "apple 180F"])
    }

    @Test func peripheralManagerTypedAloneIsCalledOnce() async throws {
        let app = TypedPeripheralManager()
        #expect(try await add(with: app, calls: app.calls) == ["typed 180D", "typed 180F"])
    }
}
