import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// The most advertising data each bluetoothd takes (issue 17): 31 bytes of data, and a long
/// name besides, which bluetoothd sends in the scan response.
extension EndToEndTests {
    static let advertisedService = BluetoothUUID(string: "5A1E00AD-B1E2-4C00-9E00-000000000001")

    @Test(.loadScaledTimeLimit(minutes: 3)) func theLongestAdvertisementReachesACentralWithItsFullName() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let server = E2EPeripheralManagerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        defer { manager.stopAdvertising() }
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }
        let delegate = E2ECentralDelegate()
        let central = CentralManager(
            delegate: delegate, queue: delegate.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { central.state == .poweredOn }

        // 3 (flags) + 18 (a 128-bit service UUID) + 10 (manufacturer data) = 31 bytes, the most a
        // legacy advertisement holds (both bluetoothd versions report MaxAdvLen 31 on btvirt's
        // controllers); the 29-byte name fills the scan response.
        let name = "BlueZKit's longest name, 29 B"
        let manufacturerData = Data([0xFF, 0xFF, 1, 2, 3, 4, 5, 6])
        #expect(name.utf8.count == 29)
        let seen = Mutex<[AdvertisementData]>([])
        let reader = Task {
            for await discovery in central.discoveries() { seen.withLock { $0.append(discovery.advertisementData) } }
        }
        defer { reader.cancel() }
        central.scanForPeripherals(
            withServices: [Self.advertisedService], options: [CBCentralManagerScanOptionAllowDuplicatesKey: true])
        manager.startAdvertising(
            AdvertisementData(
                localName: name, manufacturerData: manufacturerData, serviceUUIDs: [Self.advertisedService]))
        try await waitUntil("advertising", timeout: .seconds(30)) { !server.log.isEmpty }
        // Before: refused by us as 62 bytes, though bluetoothd takes it.
        #expect(server.log == ["advertising"])
        try await waitUntil("the full name seen", timeout: .seconds(60)) {
            seen.withLock { $0.contains { $0.localName == name } }
        }
        let data = try #require(seen.withLock { $0.last { $0.localName == name } })
        #expect(data.manufacturerData == manufacturerData)
        #expect(data.serviceUUIDs == [Self.advertisedService])
        central.stopScan()

        // One byte more is refused before bluetoothd sees it, with the sizes in the message.
        manager.stopAdvertising()
        manager.startAdvertising(
            AdvertisementData(
                localName: name, manufacturerData: manufacturerData + Data([7]),
                serviceUUIDs: [Self.advertisedService]))
        try await waitUntil("answered", timeout: .seconds(30)) { server.log.count == 2 }
        #expect(server.log.last?.contains("needs 32 bytes") == true, "\(server.log)")
    }
}
