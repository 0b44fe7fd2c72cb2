import BlueZKit
import Foundation
import TestSupport
import Testing

/// In the serialized end-to-end suite: hci0 and hci1 through the real bluetoothd.
extension EndToEndTests {
    static let changingService = BluetoothUUID(string: "5A1E0004-B1E2-4C00-9E00-000000000004")
    static let addedService = BluetoothUUID(string: "5A1E0005-B1E2-4C00-9E00-000000000005")

    /// Our peripheral on hci1 adds and removes a service while our central on hci0 is connected:
    /// bluetoothd indicates Service Changed, the central's bluetoothd rediscovers, and the app
    /// hears `didModifyServices`.
    @Test(.loadScaledTimeLimit(minutes: 3)) func servicesChangedWhileConnectedAreReported() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let server = E2EPeripheralManagerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        defer {
            manager.stopAdvertising()
            manager.removeAllServices()
        }
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let first = MutableService(type: Self.changingService, primary: true)
        first.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0x2A38), properties: [.read], value: Data([1]), permissions: [.readable])
        ]
        manager.add(first)
        try await waitUntil("service added", timeout: .seconds(30)) { server.log.contains("added") }

        let delegate = E2ECentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { central.state == .poweredOn }
        central.scanForPeripherals(withServices: [Self.changingService])
        try await waitUntil("scanning") { central.isScanning }
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [Self.changingService]])
        try await waitUntil("discovered", timeout: .seconds(60)) { delegate.discovered != nil }
        central.stopScan()
        let peripheral = try #require(delegate.discovered)
        let recorder = E2EPeripheralDelegate()
        peripheral.delegate = recorder
        central.connect(peripheral)
        try await waitUntil("connected", timeout: .seconds(60)) { peripheral.state == .connected }
        peripheral.discoverServices(nil)
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        #expect(peripheral.services?.contains { $0.uuid == Self.changingService } == true)

        // Added: an empty list, and rediscovery finds the new service.
        let second = MutableService(type: Self.addedService, primary: true)
        second.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0x2A19), properties: [.read], value: Data([9]), permissions: [.readable])
        ]
        manager.add(second)
        try await waitUntil("modified after the addition", timeout: .seconds(30)) { recorder.count("modified") >= 1 }
        peripheral.discoverServices(nil)
        try await waitUntil("services again", timeout: .seconds(30)) {
            peripheral.services?.contains { $0.uuid == Self.addedService } == true
        }

        // Removed: the service is reported invalidated and is gone.
        let before = recorder.count("modified")
        manager.remove(first)
        try await waitUntil("modified after the removal", timeout: .seconds(30)) {
            recorder.events.contains("modified \(Self.changingService.uuidString)")
        }
        #expect(recorder.count("modified") > before)
        #expect(peripheral.services?.contains { $0.uuid == Self.changingService } == false)

        central.cancelPeripheralConnection(peripheral)
        try await waitUntil("disconnected", timeout: .seconds(30)) { peripheral.state == .disconnected }
    }
}
