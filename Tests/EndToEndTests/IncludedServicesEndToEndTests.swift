import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the same serialized suite as the other tests that use hci0 and hci1.
extension EndToEndTests {
    static let includingService = BluetoothUUID(string: "5A1E1001-B1E2-4C00-9E00-000000000001")
    static let includedService = BluetoothUUID(string: "5A1E1002-B1E2-4C00-9E00-000000000001")
    static let includedCharacteristic = BluetoothUUID(string: "5A1E1003-B1E2-4C00-9E00-000000000001")

    /// Our peripheral on hci1 publishes a primary service that includes a secondary one (added
    /// first, on its own); our central on hci0 finds the secondary one through
    /// `discoverIncludedServices` and reads its characteristic, answered by our delegate.
    @Test(.loadScaledTimeLimit(minutes: 3)) func includedServicesThroughTheRealBluetoothd() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let server = IncludedServicesServer()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }

        let secondary = MutableService(type: Self.includedService, primary: false)
        secondary.characteristics = [
            MutableCharacteristic(
                type: Self.includedCharacteristic, properties: [.read], value: nil, permissions: [.readable])
        ]
        let primary = MutableService(type: Self.includingService, primary: true)
        primary.characteristics = [
            MutableCharacteristic(
                type: BluetoothUUID(0x2A38), properties: [.read], value: Data([0x02]), permissions: [.readable])
        ]
        primary.includedServices = [secondary]
        manager.add(secondary)
        try await waitUntil("secondary added", timeout: .seconds(30)) { server.log.count == 1 }
        manager.add(primary)
        try await waitUntil("primary added", timeout: .seconds(30)) { server.log.count == 2 }
        #expect(server.log == ["added \(Self.includedService)", "added \(Self.includingService)"])

        let central = E2ECentralDelegate()
        let centralManager = CentralManager(
            delegate: central, queue: central.queue, options: CentralManagerOptions(adapter: "hci0"))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { centralManager.state == .poweredOn }
        centralManager.scanForPeripherals(withServices: [Self.includingService])
        try await waitUntil("scanning") { centralManager.isScanning }
        manager.startAdvertising([CBAdvertisementDataServiceUUIDsKey: [Self.includingService]])
        try await waitUntil("advertising", timeout: .seconds(30)) { manager.isAdvertising }
        try await waitUntil("discovered our peripheral", timeout: .seconds(60)) { central.discovered != nil }
        centralManager.stopScan()
        let sensor = try #require(central.discovered)

        let recorder = IncludedServicesRecorder()
        sensor.delegate = recorder
        centralManager.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }
        sensor.discoverServices(nil)
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        let services = sensor.services ?? []
        #expect(services.filter { $0.uuid == Self.includingService }.count == 1)
        #expect(!services.contains { $0.uuid == Self.includedService }, "a secondary service is not discovered")
        let remotePrimary = try #require(services.first { $0.uuid == Self.includingService })
        sensor.discoverIncludedServices(nil, for: remotePrimary)
        try await waitUntil("included services", timeout: .seconds(30)) { recorder.count("included") == 1 }
        #expect(recorder.errors.isEmpty)
        let included = remotePrimary.includedServices ?? []
        #expect(included.map(\.uuid) == [Self.includedService])
        let remoteSecondary = try #require(included.first)
        #expect(!remoteSecondary.isPrimary)

        sensor.discoverCharacteristics(nil, for: remoteSecondary)
        try await waitUntil("characteristics", timeout: .seconds(30)) { recorder.count("characteristics") == 1 }
        let characteristic = try #require(
            remoteSecondary.characteristics?.first { $0.uuid == Self.includedCharacteristic })
        sensor.readValue(for: characteristic)
        try await waitUntil("read", timeout: .seconds(30)) { recorder.count("value") == 1 }
        #expect(characteristic.value == Data([0x5A]))
        #expect(server.log.last == "read \(Self.includedCharacteristic)")

        centralManager.cancelPeripheralConnection(sensor)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }
        manager.stopAdvertising()
        manager.removeAllServices()
    }
}

/// Records `didAdd` and answers reads with `[0x5A]`.
final class IncludedServicesServer: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.included-services")
    private let events = Mutex<[String]>([])
    var log: [String] { events.withLock { $0 } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        events.withLock { $0.append(error == nil ? "added \(service.uuid)" : "add failed: \(error!)") }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        events.withLock { $0.append("read \(request.characteristic.uuid)") }
        request.value = Data([0x5A])
        peripheral.respond(to: request, withResult: .success)
    }
}

/// Records discoveries and reads on the central side.
final class IncludedServicesRecorder: PeripheralDelegate, @unchecked Sendable {
    private let state = Mutex<([String], [any Error])>(([], []))
    func count(_ event: String) -> Int { state.withLock { $0.0.filter { $0 == event }.count } }
    var errors: [any Error] { state.withLock { $0.1 } }
    private func record(_ event: String, _ error: (any Error)?) {
        state.withLock {
            $0.0.append(event)
            if let error { $0.1.append(error) }
        }
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) { record("services", error) }
    func peripheral(
        _ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?
    ) { record("included", error) }
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        record("characteristics", error)
    }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        record("value", error)
    }
}
