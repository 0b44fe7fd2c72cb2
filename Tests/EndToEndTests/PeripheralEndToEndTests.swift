import BlueZKit
import Foundation
import Synchronization
import TestSupport
import Testing

/// In the same serialized suite as the central test: both use hci0 and hci1.
extension EndToEndTests {
    /// A service UUID of this test's own: hci1's database may still hold
    /// example-gatt-server's heart-rate service from the other test.
    static let testService = BluetoothUUID(string: "5A1E0001-B1E2-4C00-9E00-000000000001")
    static let streamCharacteristic = BluetoothUUID(string: "5A1E0002-B1E2-4C00-9E00-000000000001")

    /// Our heart-rate-like peripheral on hci1, our central on hci0, through the real bluetoothd.
    @Test(.loadScaledTimeLimit(minutes: 3)) func ourCentralAgainstOurPeripheral() async throws {
        try await ExamplePeripheral.forgetKnownDevices()
        let server = E2EPeripheralManagerDelegate()
        let manager = PeripheralManager(
            delegate: server, queue: server.queue, options: PeripheralManagerOptions(adapter: "hci1"))
        try await waitUntil("hci1 powered on", timeout: .seconds(30)) { manager.state == .poweredOn }

        let measurement = MutableCharacteristic(
            type: BluetoothUUID(0x2A37), properties: [.notify], value: nil, permissions: [])
        let location = MutableCharacteristic(
            type: BluetoothUUID(0x2A38), properties: [.read], value: Data([0x02]), permissions: [.readable])
        let control = MutableCharacteristic(
            type: BluetoothUUID(0x2A39), properties: [.write], value: nil, permissions: [.writeable])
        let stream = MutableCharacteristic(
            type: Self.streamCharacteristic, properties: [.writeWithoutResponse], value: nil, permissions: [.writeable])
        let alert = MutableCharacteristic(
            type: BluetoothUUID(0x2A05), properties: [.indicate], value: nil, permissions: [])
        let service = MutableService(type: Self.testService, primary: true)
        service.characteristics = [measurement, location, control, stream, alert]
        manager.add(service)
        try await waitUntil("service added", timeout: .seconds(30)) { server.log.contains("added") }
        #expect(server.log == ["added"])

        let central = E2ECentralDelegate()
        let centralManager = CentralManager(
            delegate: central, queue: central.queue,
            options: CentralManagerOptions(adapter: "hci0", usesNotifySockets: true))
        try await waitUntil("hci0 powered on", timeout: .seconds(30)) { centralManager.state == .poweredOn }
        centralManager.scanForPeripherals(withServices: [Self.testService])
        try await waitUntil("scanning") { centralManager.isScanning }
        manager.startAdvertising([
            CBAdvertisementDataLocalNameKey: "BZK", CBAdvertisementDataServiceUUIDsKey: [Self.testService],
        ])
        try await waitUntil("advertising", timeout: .seconds(30)) { server.log.contains("advertising") }
        #expect(manager.isAdvertising)
        try await waitUntil("discovered our peripheral", timeout: .seconds(60)) { central.discovered != nil }
        centralManager.stopScan()
        let sensor = try #require(central.discovered)

        let recorder = E2EPeripheralDelegate()
        sensor.delegate = recorder
        centralManager.connect(sensor)
        try await waitUntil("connected", timeout: .seconds(60)) { sensor.state == .connected }
        sensor.discoverServices([Self.testService])
        try await waitUntil("services", timeout: .seconds(30)) { recorder.count("services") == 1 }
        let remote = try #require(sensor.services?.first)
        sensor.discoverCharacteristics(nil, for: remote)
        try await waitUntil("characteristics") { recorder.count("characteristics") == 1 }
        let characteristics = try #require(remote.characteristics)
        let remoteMeasurement = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A37) })
        let remoteLocation = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A38) })
        let remoteControl = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A39) })
        let remoteStream = try #require(characteristics.first { $0.uuid == Self.streamCharacteristic })
        let remoteAlert = try #require(characteristics.first { $0.uuid == BluetoothUUID(0x2A05) })

        sensor.readValue(for: remoteLocation)
        try await waitUntil("read the static value") { recorder.count("value 2A38") == 1 }
        #expect(remoteLocation.value == Data([0x02]))

        sensor.writeValue(Data([0x01]), for: remoteControl, type: .withResponse)
        try await waitUntil("write accepted") { recorder.count("wrote 2A39") == 1 }
        #expect(recorder.errors.isEmpty)
        #expect(server.log.contains("write 2A39 01"))
        sensor.writeValue(Data([0x05]), for: remoteControl, type: .withResponse)
        try await waitUntil("write refused") { recorder.count("wrote 2A39") == 2 }
        #expect((recorder.errors.last as? ATTError)?.code == .application(0x80))

        sensor.setNotifyValue(true, for: remoteMeasurement)
        try await waitUntil("subscribed") { recorder.count("notifying 2A37 true") == 1 }
        try await waitUntil("a notification arrives", timeout: .seconds(30)) {
            _ = manager.updateValue(Data([0x00, 72]), for: measurement, onSubscribedCentrals: nil)
            return recorder.count("value 2A37") >= 1
        }
        #expect(remoteMeasurement.value == Data([0x00, 72]))
        // Through AcquireNotify's socket (bluetoothd offers it for notify characteristics): in order.
        for beat in 100..<120 as Range<UInt8> {
            try await waitUntil("room to notify") {
                manager.updateValue(Data([0x00, beat]), for: measurement, onSubscribedCentrals: nil)
            }
        }
        try await waitUntil("20 more notifications", timeout: .seconds(30)) {
            recorder.events.last { $0.hasPrefix("value 2A37") } == "value 2A37 0077"
        }
        #expect(
            recorder.events.filter { $0.hasPrefix("value 2A37") }.suffix(20)
                == (100..<120).map { "value 2A37 00\(String($0, radix: 16))" })

        // Indications: bluetoothd offers no AcquireNotify for them, so this is StartNotify.
        sensor.setNotifyValue(true, for: remoteAlert)
        try await waitUntil("subscribed to indications") { recorder.count("notifying 2A05 true") == 1 }
        try await waitUntil("an indication arrives", timeout: .seconds(30)) {
            _ = manager.updateValue(Data([0x05]), for: alert, onSubscribedCentrals: nil)
            return recorder.count("value 2A05") >= 1
        }
        #expect(remoteAlert.value == Data([0x05]))

        // Writes without response through AcquireWrite's socket, in order.
        for index in 0..<40 as Range<UInt8> {
            sensor.writeValue(Data([0x01, index]), for: remoteStream, type: .withoutResponse)
        }
        try await waitUntil("40 writes without response", timeout: .seconds(30)) {
            server.log.filter { $0.hasPrefix("write \(Self.streamCharacteristic)") }.count == 40
        }
        // All of them, but not necessarily in order: bluetoothd 5.66 spreads ATT commands over its
        // EATT bearers (main.conf `Channels`, 3 by default), and each bearer is served on its own.
        #expect(
            server.log.filter { $0.hasPrefix("write \(Self.streamCharacteristic)") }.sorted()
                == (0..<40).map { String(format: "write \(Self.streamCharacteristic) 01%02x", $0) })

        centralManager.cancelPeripheralConnection(sensor)
        try await waitUntil("disconnected", timeout: .seconds(30)) { sensor.state == .disconnected }
        manager.stopAdvertising()
        manager.removeAllServices()
        #expect(!manager.isAdvertising)
    }
}

final class E2EPeripheralManagerDelegate: PeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "e2e.peripheral")
    private let events = Mutex<[String]>([])
    var log: [String] { events.withLock { $0 } }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: MutableService, error: (any Error)?) {
        events.withLock { $0.append(error == nil ? "added" : "add failed: \(error!)") }
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        events.withLock { $0.append(error == nil ? "advertising" : "advertising failed: \(error!)") }
    }
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        let hex = (first.value ?? Data()).map { String(format: "%02x", $0) }.joined()
        events.withLock { $0.append("write \(first.characteristic.uuid) \(hex)") }
        peripheral.respond(to: first, withResult: first.value == Data([0x01]) ? .success : .application(0x80))
    }
}
